//! The arithmetic of the forward pass: matrix products (gemm's kernels, chosen at run time for
//! the CPU), and the element-wise work between them (layer norm, the exact GELU, softmax)
//! written so the compiler vectorizes it, in copies compiled for AVX-512 and for AVX2 that the
//! CPU's features choose between at run time.

use gemm::Parallelism;

/// A matrix view over a slice: `rows × cols`, element `(r, c)` at `r * row_stride + c *
/// col_stride`. Construction checks that every element lies inside the slice, which is what
/// makes [`matmul`] safe.
#[derive(Clone, Copy)]
pub(crate) struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

/// The mutable counterpart of [`Mat`], for a product's destination.
pub(crate) struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    row_stride: usize,
}

/// Offset one past the last element of a `rows × cols` view with these strides (0 if empty).
fn extent(rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> usize {
    if rows == 0 || cols == 0 { 0 } else { (rows - 1) * row_stride + (cols - 1) * col_stride + 1 }
}

impl<'a> Mat<'a> {
    pub(crate) fn new(data: &'a [f32], rows: usize, cols: usize, row_stride: usize, col_stride: usize) -> Mat<'a> {
        assert!(extent(rows, cols, row_stride, col_stride) <= data.len(), "matrix view out of bounds");
        Mat { data, rows, cols, row_stride, col_stride }
    }

    /// A dense row-major matrix.
    pub(crate) fn rows(data: &'a [f32], cols: usize) -> Mat<'a> {
        Mat::new(data, data.len() / cols, cols, cols, 1)
    }
}

impl<'a> MatMut<'a> {
    pub(crate) fn new(data: &'a mut [f32], rows: usize, cols: usize, row_stride: usize) -> MatMut<'a> {
        assert!(extent(rows, cols, row_stride, 1) <= data.len(), "matrix view out of bounds");
        MatMut { data, rows, cols, row_stride }
    }

    pub(crate) fn rows(data: &'a mut [f32], cols: usize) -> MatMut<'a> {
        let rows = data.len() / cols;
        MatMut::new(data, rows, cols, cols)
    }
}

/// Whether work may spread over the thread pool: a long pass alone does; the passes of a
/// batch run side by side, each on one thread, and so do the small per-text attention
/// products.
#[derive(Clone, Copy)]
pub(crate) enum Threads {
    All,
    One,
}

/// `dst = scale · lhs × rhs`, or `dst += scale · lhs × rhs` when `accumulate` (how a bias or
/// a residual already written into `dst` is added without another pass).
pub(crate) fn matmul(dst: MatMut<'_>, lhs: Mat<'_>, rhs: Mat<'_>, scale: f32, accumulate: bool, threads: Threads) {
    assert!(
        dst.rows == lhs.rows && dst.cols == rhs.cols && lhs.cols == rhs.rows,
        "matrix product of mismatched shapes"
    );
    if dst.rows == 0 || dst.cols == 0 {
        return;
    }
    let parallelism = match threads {
        // 0: as many threads as rayon's pool has.
        Threads::All => Parallelism::Rayon(0),
        Threads::One => Parallelism::None,
    };
    let stride = |s: usize| s as isize;
    // SAFETY: the three views were bounds-checked when built, `dst` is borrowed mutably and so
    // aliases neither operand, and the shapes agree (checked above).
    unsafe {
        gemm::gemm(
            dst.rows,
            dst.cols,
            lhs.cols,
            dst.data.as_mut_ptr(),
            1,
            stride(dst.row_stride),
            accumulate,
            lhs.data.as_ptr(),
            stride(lhs.col_stride),
            stride(lhs.row_stride),
            rhs.data.as_ptr(),
            stride(rhs.col_stride),
            stride(rhs.row_stride),
            1.0,
            scale,
            false,
            false,
            false,
            parallelism,
        );
    }
}

/// Runs `body` in the copy compiled for the widest vectors the CPU has: AVX-512 (16 floats),
/// else AVX2 (8 floats), both with fused multiply-add; elsewhere the baseline copy. The kernels
/// below spell every multiply-add as `mul_add`, which the compiler never forms on its own: in
/// the first two copies each is one FMA instruction, and in the baseline copy a call to the C
/// library's `fmaf`, slower but with the same rounding, so every copy gives the same floats.
macro_rules! with_widest_vectors {
    ($name:ident, $generic:ident, ($($arg:ident: $ty:ty),*)) => {
        pub(crate) fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn avx512($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn avx2($($arg: $ty),*) {
                    $generic($($arg),*)
                }
                let fma = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
                if fma && std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the features `avx512` was compiled for (checked above).
                    return unsafe { avx512($($arg),*) };
                }
                if fma {
                    // SAFETY: the CPU has the features `avx2` was compiled for (checked above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $generic($($arg),*)
        }
    };
}

with_widest_vectors!(gelu, gelu_generic, (values: &mut [f32]));
with_widest_vectors!(softmax, softmax_generic, (row: &mut [f32]));
with_widest_vectors!(layer_norm, layer_norm_generic, (row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32));

/// Independent partial results kept side by side in the reductions below: a float sum is not
/// associative, so a single running total would keep the compiler from vectorizing the loop.
const LANES: usize = 16;

/// The sum of `f(x)` over `xs`.
#[inline(always)]
fn sum_of(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for chunk in chunks {
        lanes.iter_mut().zip(chunk).for_each(|(lane, &x)| *lane += f(x));
    }
    lanes.iter().sum::<f32>() + rest
}

/// The largest of `xs` (negative infinity for none).
#[inline(always)]
fn max_of(xs: &[f32]) -> f32 {
    let larger = |a: f32, b: f32| if b > a { b } else { a };
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let chunks = xs.chunks_exact(LANES);
    let rest = chunks.remainder().iter().fold(f32::NEG_INFINITY, |m, &x| larger(m, x));
    for chunk in chunks {
        lanes.iter_mut().zip(chunk).for_each(|(lane, &x)| *lane = larger(*lane, x));
    }
    lanes.into_iter().fold(rest, larger)
}

/// Normalizes a row to zero mean and unit variance, then scales and shifts it (BERT's
/// LayerNorm).
#[inline(always)]
fn layer_norm_generic(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum_of(row, |x| x) / n;
    let variance = sum_of(row, |x| (x - mean) * (x - mean)) / n;
    let inverse = 1.0 / (variance + eps).sqrt();
    for ((x, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *x = ((*x - mean) * inverse).mul_add(*w, *b);
    }
}

/// The exact GELU, `x · Φ(x)` with the normal distribution's CDF through erf, as BERT's
/// `gelu` (not its tanh approximation).
#[inline(always)]
fn gelu_generic(values: &mut [f32]) {
    for x in values {
        let half = 0.5 * *x;
        *x = half.mul_add(erf(*x * std::f32::consts::FRAC_1_SQRT_2), half);
    }
}

/// Softmax of one row of attention scores, in place.
#[inline(always)]
fn softmax_generic(row: &mut [f32]) {
    let max = max_of(row);
    for x in row.iter_mut() {
        *x = exp(*x - max);
    }
    let inverse = 1.0 / sum_of(row, |x| x);
    for x in row.iter_mut() {
        *x *= inverse;
    }
}

/// erf by Abramowitz and Stegun's formula 7.1.26 (absolute error below 1.5e-7, under a float's
/// resolution near 1), branch-free so that a loop over it vectorizes.
#[inline(always)]
fn erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [0.254_829_6, -0.284_496_74, 1.421_413_8, -1.453_152_1, 1.061_405_4];
    let a = x.abs();
    let t = 1.0 / P.mul_add(a, 1.0);
    let poly = t * A[4].mul_add(t, A[3]).mul_add(t, A[2]).mul_add(t, A[1]).mul_add(t, A[0]);
    let magnitude = (-poly).mul_add(exp(-a * a), 1.0);
    magnitude.copysign(x)
}

/// e^x for single precision (relative error about 2e-7 over the range a float can hold),
/// branch-free: x = k·ln2 + r with |r| ≤ ln2/2, e^r by its Taylor series to the 7th power, and
/// 2^k written straight into the exponent bits.
#[inline(always)]
fn exp(x: f32) -> f32 {
    // Below this e^x is under the smallest normal float; above it, over the largest.
    let x = x.clamp(-87.3, 88.3);
    // Adding 1.5·2^23 rounds to the nearest integer (no call to `round`, which would keep the
    // loop from vectorizing), and leaves that integer in the sum's low mantissa bits, from where
    // it is read without a float-to-int conversion (whose saturation is not vectorized either).
    const ROUNDER: f32 = 12_582_912.0;
    let shifted = x.mul_add(std::f32::consts::LOG2_E, ROUNDER);
    let k = shifted - ROUNDER;
    let k_bits = shifted.to_bits().wrapping_sub(ROUNDER.to_bits());
    // ln 2 in two parts, so that k·ln2 is subtracted without losing r's low bits.
    const LN2_HIGH: f32 = 0.693_145_75;
    const LN2_LOW: f32 = 1.428_606_8e-6;
    let r = k.mul_add(-LN2_LOW, k.mul_add(-LN2_HIGH, x));
    // The Taylor coefficients 1/n!, highest first, as constants: `r / 5040.0` would be a
    // division on every call, as the compiler may not turn it into a multiplication.
    const TAYLOR: [f32; 8] = [1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0];
    let series = TAYLOR[1..].iter().fold(TAYLOR[0], |sum, &c| sum.mul_add(r, c));
    // 2^k: k plus the exponent bias, in the exponent field.
    let two_to_k = f32::from_bits(k_bits.wrapping_add(127) << 23);
    series * two_to_k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn erf_reference(x: f64) -> f64 {
        // The series erf(x) = 2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1)), converging well for |x| ≤ 4.
        let mut term = x;
        let mut sum = x;
        for n in 1..200 {
            term *= -x * x / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    }

    #[test]
    fn exp_matches_the_standard_library_across_the_float_range() {
        let mut worst = 0f64;
        for i in -8730..=8830 {
            let x = i as f32 / 100.0;
            let expected = (x as f64).exp();
            let relative = ((exp(x) as f64 - expected) / expected).abs();
            worst = worst.max(relative);
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert_eq!(exp(-1000.0), exp(-87.3), "very negative inputs clamp instead of wrapping");
        assert!(exp(1000.0).is_finite());
    }

    #[test]
    fn erf_and_gelu_match_their_definitions() {
        let mut worst = 0f64;
        for i in -400..=400 {
            let x = i as f32 / 100.0;
            worst = worst.max((erf(x) as f64 - erf_reference(x as f64)).abs());
        }
        assert!(worst < 5e-7, "worst absolute error of erf {worst}");
        let mut values = [-3.0f32, -1.0, 0.0, 0.5, 2.0];
        gelu(&mut values);
        for (x, y) in [-3.0f64, -1.0, 0.0, 0.5, 2.0].into_iter().zip(values) {
            let expected = 0.5 * x * (1.0 + erf_reference(x / 2f64.sqrt()));
            assert!((y as f64 - expected).abs() < 1e-6, "gelu({x}) = {y}, expected {expected}");
        }
    }

    #[test]
    fn the_vectorized_copies_give_the_same_floats_as_the_baseline() {
        // Every multiply-add is fused in every copy, so the widest copy this CPU runs and the
        // baseline one (fused by the C library) round alike, and no reduction order differs.
        let values: Vec<f32> = (-2000..2000).map(|i| i as f32 / 211.0).collect();
        let (mut wide, mut baseline) = (values.clone(), values.clone());
        gelu(&mut wide);
        gelu_generic(&mut baseline);
        assert_eq!(wide, baseline, "gelu");
        let row = &values[..1000];
        let (mut wide, mut baseline) = (row.to_vec(), row.to_vec());
        softmax(&mut wide);
        softmax_generic(&mut baseline);
        assert_eq!(wide, baseline, "softmax");
        let (weight, bias): (Vec<f32>, Vec<f32>) = row.iter().map(|x| (1.0 + x / 10.0, x / 3.0)).unzip();
        let (mut wide, mut baseline) = (row.to_vec(), row.to_vec());
        layer_norm(&mut wide, &weight, &bias, 1e-12);
        layer_norm_generic(&mut baseline, &weight, &bias, 1e-12);
        assert_eq!(wide, baseline, "layer norm");
    }

    #[test]
    fn softmax_rows_sum_to_one_and_keep_their_order() {
        let mut row = [1.0f32, 2.0, 3.0, -50.0];
        softmax(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        let expected: Vec<f64> = {
            let e: Vec<f64> = [1.0f64, 2.0, 3.0, -50.0].iter().map(|x| (x - 3.0).exp()).collect();
            let s: f64 = e.iter().sum();
            e.iter().map(|x| x / s).collect()
        };
        for (got, want) in row.iter().zip(expected) {
            assert!((*got as f64 - want).abs() < 1e-7, "{got} vs {want}");
        }
    }

    #[test]
    fn matmul_with_strides_scale_and_accumulation() {
        // lhs 2×3, rhs given as the transpose of a 2×3 (so 3×2 through strides).
        let lhs = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let rhs_transposed = [1.0f32, 0.0, 1.0, 0.0, 1.0, 0.0];
        let mut dst = [10.0f32, 20.0, 30.0, 40.0];
        let rhs = Mat::new(&rhs_transposed, 3, 2, 1, 3);
        matmul(MatMut::rows(&mut dst, 2), Mat::rows(&lhs, 3), rhs, 2.0, true, Threads::One);
        assert_eq!(dst, [10.0 + 2.0 * 4.0, 20.0 + 2.0 * 2.0, 30.0 + 2.0 * 10.0, 40.0 + 2.0 * 5.0]);
        matmul(MatMut::rows(&mut dst, 2), Mat::rows(&lhs, 3), rhs, 1.0, false, Threads::All);
        assert_eq!(dst, [4.0, 2.0, 10.0, 5.0]);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn a_view_past_its_slice_is_refused() {
        let data = [0.0f32; 5];
        Mat::new(&data, 2, 3, 3, 1);
    }

    #[test]
    fn reductions_cover_every_element() {
        let xs: Vec<f32> = (0..37).map(|i| i as f32).collect();
        assert_eq!(sum_of(&xs, |x| x), 666.0);
        assert_eq!(sum_of(&xs[..5], |x| 2.0 * x), 20.0);
        assert_eq!(max_of(&xs), 36.0);
        assert_eq!(max_of(&[-3.0, -1.0]), -1.0);
        assert_eq!(max_of(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn layer_norm_centres_and_scales() {
        let mut row = [1.0f32, 2.0, 3.0, 4.0];
        layer_norm(&mut row, &[1.0; 4], &[0.5; 4], 1e-12);
        let mean: f32 = row.iter().sum::<f32>() / 4.0;
        assert!((mean - 0.5).abs() < 1e-6);
        assert!((row[3] - row[0] - 2.0 * 1.5 / 1.25f32.sqrt()).abs() < 1e-5);
    }
}
