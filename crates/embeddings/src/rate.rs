//! How much arithmetic embedding a text takes, and how fast this machine multiplies float32
//! matrices, so a benchmark can say what share of the machine's matrix rate the model reaches.
//!
//! Both figures count a multiply-add as two floating-point operations (FLOP), as BLAS
//! benchmarks do.
use std::time::{Duration, Instant};

use crate::kernels::{Mat, MatMut, Threads, matmul};

/// all-MiniLM-L6-v2's shape (its config.json): encoder layers, hidden width H and
/// feed-forward width I. Its 12 heads split H without changing the work.
const LAYERS: f64 = 6.0;
const HIDDEN: f64 = crate::DIMENSIONS as f64;
const INTERMEDIATE: f64 = 1536.0;

/// Texts per forward pass and tokens of a typical text of the synthetic corpus: the matrix
/// rate is measured on the feed-forward product of such a batch.
const BATCH_TEXTS: usize = 32;
const TYPICAL_TOKENS: usize = 58;

/// The matrix product [`matrix_rate`] times, as (rows, inner, columns): a batch's tokens
/// (32 texts × 58 tokens) times the hidden width, times the first feed-forward weight.
pub const MATRIX_SHAPE: (usize, usize, usize) = (BATCH_TEXTS * TYPICAL_TOKENS, 384, 1536);

/// FLOP to embed one text of `tokens` tokens (special tokens included) with
/// all-MiniLM-L6-v2, counting the matrix products only.
///
/// Per layer, for n tokens, hidden width H = 384 and feed-forward width I = 1536:
/// - the projections: query, key and value (H × 3H), the attention output (H × H) and the
///   feed-forward pair (H × I and I × H), each a multiply-add per weight per token:
///   2·n·(H·3H + H·H + 2·H·I);
/// - the attention products, queries × keys and weights × values, each n × n × H over all
///   heads together: 2·2·n²·H.
///
/// So about 21.2 MFLOP a token for short texts, plus the attention's n² share (2.5% at 58
/// tokens). Embeddings, layer norms, softmax and GELU are left out: they are not matrix
/// products, and together a small fraction of the work.
pub fn flops_per_text(tokens: usize) -> f64 {
    flops_at(tokens as f64)
}

/// FLOP to embed `texts` texts holding `tokens` tokens in all, when only the total is known
/// (as [`crate::Embeddings::token_count`] gives it): the projections are exact, being linear in
/// the tokens; the attention products are taken at the mean length, which undercounts them by
/// the spread of the lengths around it.
pub fn flops_for_texts(tokens: usize, texts: usize) -> f64 {
    if texts == 0 {
        return 0.0;
    }
    texts as f64 * flops_at(tokens as f64 / texts as f64)
}

/// [`flops_per_text`] for a length that may be a mean.
fn flops_at(n: f64) -> f64 {
    let (h, i) = (HIDDEN, INTERMEDIATE);
    let projections = 2.0 * n * (h * 3.0 * h + h * h + 2.0 * h * i);
    let attention = 2.0 * 2.0 * n * n * h;
    LAYERS * (projections + attention)
}

/// This machine's float32 matrix rate in GFLOP/s, measured on the product of [`MATRIX_SHAPE`]
/// through the very call the embedder's products go through, two ways, each for about
/// `duration` after a warm-up.
#[derive(Debug, Clone, Copy)]
pub struct MatrixRate {
    /// One product at a time, spread over every core.
    pub shared: f64,
    /// One product per core, side by side (how the embedder runs a batch's passes).
    pub side_by_side: f64,
}

impl MatrixRate {
    /// The machine's limit: the faster of the two ways.
    pub fn best(&self) -> f64 {
        self.shared.max(self.side_by_side)
    }
}

/// Times both ways, one after the other, each on every core.
pub fn matrix_rate(duration: Duration) -> MatrixRate {
    let shared = timed_products(Threads::All, duration);
    let side_by_side = rayon::broadcast(|_| timed_products(Threads::One, duration)).iter().sum();
    MatrixRate { shared, side_by_side }
}

/// GFLOP/s of the [`MATRIX_SHAPE`] product repeated on this thread for about `duration`.
fn timed_products(threads: Threads, duration: Duration) -> f64 {
    let (m, k, n) = MATRIX_SHAPE;
    // Values of the size of a layer's activations and weights, never zero or denormal, so the
    // kernels run at the speed they run on real data.
    let lhs: Vec<f32> = (0..m * k).map(|i| ((i % 17) as f32 - 8.0) * 0.05).collect();
    let rhs: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32 - 6.0) * 0.01).collect();
    let mut dst = vec![0.0f32; m * n];
    let mut product = || matmul(MatMut::rows(&mut dst, n), Mat::rows(&lhs, k), Mat::rows(&rhs, n), 1.0, false, threads);
    // The warm-up starts the thread pool and brings the weights into the caches.
    for _ in 0..3 {
        product();
    }
    let started = Instant::now();
    let mut products = 0u64;
    while products == 0 || started.elapsed() < duration {
        product();
        products += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    std::hint::black_box(&dst);
    products as f64 * 2.0 * (m * k * n) as f64 / seconds / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_per_text_follows_the_formula() {
        // One layer at 58 tokens: 2·58·(384·1152 + 384·384 + 2·384·1536) = 2·58·1,769,472
        // = 205,258,752 for the projections, 4·58²·384 = 5,167,104 for the attention;
        // six layers: 1,262,555,136.
        assert_eq!(flops_per_text(58), 1_262_555_136.0);
        // One token: 6·(2·1,769,472 + 4·384) = 21,242,880.
        assert_eq!(flops_per_text(1), 21_242_880.0);
        assert_eq!(flops_per_text(0), 0.0);
    }

    #[test]
    fn texts_of_equal_length_count_as_one_each() {
        assert_eq!(flops_for_texts(58 * 32, 32), 32.0 * flops_per_text(58));
        assert_eq!(flops_for_texts(0, 0), 0.0);
    }
}
