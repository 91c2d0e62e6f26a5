//! From token states to one unit vector per text, as sentence-transformers' Pooling
//! (mean over tokens) and Normalize modules do.
use candle_core::{DType, Result, Tensor};

/// Mean of each text's token states over its real tokens only. Padding must not count:
/// otherwise a text's vector would depend on the longest text it was batched with.
///
/// `states` is `(texts, tokens, hidden)`, `mask` is `(texts, tokens)` with 1 for real tokens.
pub fn masked_mean(states: &Tensor, mask: &Tensor) -> Result<Tensor> {
    let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
    let summed = states.broadcast_mul(&mask)?.sum(1)?;
    // Same floor as sentence-transformers, so an all-padding row divides by a tiny number
    // instead of zero.
    let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
    summed.broadcast_div(&counts)
}

/// Each row divided by its L2 norm (floored like torch's `F.normalize`), so that cosine
/// similarity is a dot product.
pub fn l2_normalize(rows: &Tensor) -> Result<Tensor> {
    let norms = rows.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12f32, f32::MAX)?;
    rows.broadcast_div(&norms)
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[test]
    fn padding_does_not_count_in_the_mean() {
        let states = Tensor::new(&[[[1f32, 2.], [3., 4.], [100., 100.]]], &Device::Cpu).unwrap();
        let mask = Tensor::new(&[[1u32, 1, 0]], &Device::Cpu).unwrap();
        let mean = masked_mean(&states, &mask).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(mean, vec![vec![2., 3.]]);
    }

    #[test]
    fn rows_come_out_with_unit_length() {
        let rows = Tensor::new(&[[3f32, 4.], [0., 0.5]], &Device::Cpu).unwrap();
        let unit = l2_normalize(&rows).unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(unit, vec![vec![0.6, 0.8], vec![0., 1.]]);
    }
}
