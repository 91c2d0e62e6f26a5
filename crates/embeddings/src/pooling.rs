//! From token states to one unit vector per text, as sentence-transformers' Pooling (mean over
//! tokens) and Normalize modules do.

/// The mean of a text's token states (`tokens × width`, row-major). A text always has its
/// special tokens; an empty one would give zeros, as sentence-transformers' floor on the count
/// does.
pub fn mean_of_rows(states: &[f32], width: usize) -> Vec<f32> {
    let mut mean = vec![0f32; width];
    let rows = states.chunks_exact(width);
    let count = rows.len().max(1) as f32;
    for row in rows {
        mean.iter_mut().zip(row).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= count);
    mean
}

/// Divides a vector by its L2 norm (floored like torch's `F.normalize`), so that cosine
/// similarity is a dot product.
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    vector.iter_mut().for_each(|x| *x /= norm);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_is_over_the_texts_own_rows() {
        assert_eq!(mean_of_rows(&[1., 2., 3., 4.], 2), vec![2., 3.]);
        assert_eq!(mean_of_rows(&[], 2), vec![0., 0.]);
    }

    #[test]
    fn vectors_come_out_with_unit_length() {
        let mut v = [3f32, 4.];
        l2_normalize(&mut v);
        assert_eq!(v, [0.6, 0.8]);
        let mut zero = [0f32, 0.];
        l2_normalize(&mut zero);
        assert_eq!(zero, [0., 0.]);
    }
}
