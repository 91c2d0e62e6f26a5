//! The BERT encoder all-MiniLM-L6-v2 is (embeddings, then six layers of self-attention and a
//! feed-forward block), run over the texts of a batch packed one after another: every row is a
//! real token, so no work goes to padding and no attention mask is needed. Each text attends
//! only to its own tokens, so a text's vector does not depend on the texts beside it.
//!
//! Per layer, the products that carry nearly all the arithmetic (the fused query/key/value
//! projection, the attention output, the two feed-forward products) run over all the batch's
//! tokens at once on every core; a bias and the residual are written into the product's
//! destination first and accumulated into, and GELU and layer norm work in place.

use std::path::Path;

use rayon::prelude::*;
use safetensors::{Dtype, SafeTensors};
use serde::Deserialize;

use crate::kernels::{self, Mat, MatMut, Threads};
use crate::{DIMENSIONS, EmbedError};

/// The fields of the model's `config.json` the forward pass uses.
#[derive(Debug, Deserialize)]
pub(crate) struct Config {
    hidden_size: usize,
    intermediate_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    layer_norm_eps: f64,
    hidden_act: String,
    max_position_embeddings: usize,
    vocab_size: usize,
    type_vocab_size: usize,
}

/// A dense layer, its weight stored transposed (inputs × outputs, row-major) so that
/// `tokens × inputs` times it is `tokens × outputs`.
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    outputs: usize,
}

impl Linear {
    fn weight(&self) -> Mat<'_> {
        Mat::rows(&self.weight, self.outputs)
    }

    /// `out = residual + bias + input × weight` (no residual: `out` is overwritten with the bias).
    fn apply(&self, input: Mat<'_>, out: &mut [f32], with_residual: bool) {
        out.par_chunks_mut(self.outputs).with_min_len(ROWS_PER_TASK).for_each(|row| {
            if with_residual {
                row.iter_mut().zip(&self.bias).for_each(|(x, b)| *x += b);
            } else {
                row.copy_from_slice(&self.bias);
            }
        });
        // A short pass (one query) reads every weight for a few rows: it is bound by memory,
        // not arithmetic, and a second thread only adds the hand-off (measured: no faster).
        let threads = if out.len() / self.outputs < PARALLEL_ROWS { Threads::One } else { Threads::All };
        kernels::matmul(MatMut::rows(out, self.outputs), input, self.weight(), 1.0, true, threads);
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

struct Layer {
    /// Query, key and value in one product: outputs `[q | k | v]`, each `hidden` wide.
    qkv: Linear,
    attention_out: Linear,
    attention_norm: Norm,
    intermediate: Linear,
    output: Linear,
    output_norm: Norm,
}

pub(crate) struct Model {
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    /// Every token is of type 0 (one text per input).
    token_type_embedding: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    hidden: usize,
    heads: usize,
    eps: f32,
    max_positions: usize,
    vocab: usize,
}

/// Rows handed to one rayon task in the element-wise passes: enough to outweigh the hand-off.
const ROWS_PER_TASK: usize = 16;
/// Tokens from which a pass's products spread over every core.
const PARALLEL_ROWS: usize = 64;

/// The weights file, read once and looked up by tensor name.
struct Weights<'a> {
    path: &'a Path,
    tensors: SafeTensors<'a>,
}

impl Weights<'_> {
    fn error(&self, message: String) -> EmbedError {
        EmbedError::Weights { path: self.path.to_path_buf(), message }
    }

    /// A float32 tensor of exactly `shape`, as a flat row-major vector.
    fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let view = self.tensors.tensor(name).map_err(|e| self.error(format!("{name}: {e}")))?;
        if view.dtype() != Dtype::F32 || view.shape() != shape {
            return Err(self.error(format!("{name} is {:?} {:?}, expected F32 {shape:?}", view.dtype(), view.shape())));
        }
        Ok(view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    /// A PyTorch `Linear(inputs → outputs)` (weight stored outputs × inputs), transposed.
    fn linear(&self, prefix: &str, inputs: usize, outputs: usize) -> Result<Linear, EmbedError> {
        let stored = self.get(&format!("{prefix}.weight"), &[outputs, inputs])?;
        let mut weight = vec![0f32; inputs * outputs];
        for (o, row) in stored.chunks_exact(inputs).enumerate() {
            for (i, w) in row.iter().enumerate() {
                weight[i * outputs + o] = *w;
            }
        }
        Ok(Linear { weight, bias: self.get(&format!("{prefix}.bias"), &[outputs])?, outputs })
    }

    /// Several linears over the same input side by side, as one wider linear.
    fn fused(&self, prefixes: &[&str], inputs: usize, outputs: usize) -> Result<Linear, EmbedError> {
        let parts = prefixes.iter().map(|p| self.linear(p, inputs, outputs)).collect::<Result<Vec<_>, _>>()?;
        let width = outputs * parts.len();
        let mut weight = vec![0f32; inputs * width];
        for (index, part) in parts.iter().enumerate() {
            for (row, part_row) in weight.chunks_exact_mut(width).zip(part.weight.chunks_exact(outputs)) {
                row[index * outputs..(index + 1) * outputs].copy_from_slice(part_row);
            }
        }
        let bias = parts.iter().flat_map(|p| p.bias.iter().copied()).collect();
        Ok(Linear { weight, bias, outputs: width })
    }

    fn norm(&self, prefix: &str, width: usize) -> Result<Norm, EmbedError> {
        Ok(Norm {
            weight: self.get(&format!("{prefix}.weight"), &[width])?,
            bias: self.get(&format!("{prefix}.bias"), &[width])?,
        })
    }
}

impl Model {
    /// Reads `config.json` and `model.safetensors` from `model_dir`.
    pub(crate) fn load(model_dir: &Path) -> Result<Model, EmbedError> {
        let config_path = model_dir.join("config.json");
        let config_text = std::fs::read_to_string(&config_path)
            .map_err(|source| EmbedError::Read { path: config_path.clone(), source })?;
        let config: Config = serde_json::from_str(&config_text)
            .map_err(|source| EmbedError::Config { path: config_path.clone(), source })?;
        if config.hidden_size != DIMENSIONS {
            return Err(EmbedError::Dimensions { path: config_path, found: config.hidden_size });
        }
        let unsupported = |what: String| EmbedError::Unsupported { path: config_path.clone(), what };
        if config.hidden_act != "gelu" {
            return Err(unsupported(format!("the activation {:?} (only the exact gelu)", config.hidden_act)));
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            return Err(unsupported(format!("{} attention heads", config.num_attention_heads)));
        }

        let path = model_dir.join("model.safetensors");
        let bytes = std::fs::read(&path).map_err(|source| EmbedError::Read { path: path.clone(), source })?;
        let tensors = SafeTensors::deserialize(&bytes)
            .map_err(|e| EmbedError::Weights { path: path.clone(), message: e.to_string() })?;
        let weights = Weights { path: &path, tensors };

        let (hidden, inner) = (config.hidden_size, config.intermediate_size);
        let layers = (0..config.num_hidden_layers)
            .map(|n| {
                let p = format!("encoder.layer.{n}");
                Ok(Layer {
                    qkv: weights.fused(
                        &[
                            &format!("{p}.attention.self.query"),
                            &format!("{p}.attention.self.key"),
                            &format!("{p}.attention.self.value"),
                        ],
                        hidden,
                        hidden,
                    )?,
                    attention_out: weights.linear(&format!("{p}.attention.output.dense"), hidden, hidden)?,
                    attention_norm: weights.norm(&format!("{p}.attention.output.LayerNorm"), hidden)?,
                    intermediate: weights.linear(&format!("{p}.intermediate.dense"), hidden, inner)?,
                    output: weights.linear(&format!("{p}.output.dense"), inner, hidden)?,
                    output_norm: weights.norm(&format!("{p}.output.LayerNorm"), hidden)?,
                })
            })
            .collect::<Result<Vec<_>, EmbedError>>()?;
        let token_types = weights.get("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, hidden])?;
        if token_types.len() < hidden {
            return Err(unsupported("a model without token types".into()));
        }
        Ok(Model {
            word_embeddings: weights.get("embeddings.word_embeddings.weight", &[config.vocab_size, hidden])?,
            position_embeddings: weights
                .get("embeddings.position_embeddings.weight", &[config.max_position_embeddings, hidden])?,
            token_type_embedding: token_types[..hidden].to_vec(),
            embedding_norm: weights.norm("embeddings.LayerNorm", hidden)?,
            layers,
            hidden,
            heads: config.num_attention_heads,
            eps: config.layer_norm_eps as f32,
            max_positions: config.max_position_embeddings,
            vocab: config.vocab_size,
        })
    }

    /// The last layer's token states of each text, one after another: `Σ tokens × hidden`.
    pub(crate) fn forward(&self, texts: &[&[u32]]) -> Result<Vec<f32>, EmbedError> {
        let hidden = self.hidden;
        let mut spans = Vec::with_capacity(texts.len());
        let mut tokens = Vec::new();
        for ids in texts {
            if ids.len() > self.max_positions {
                return Err(EmbedError::TooLong { tokens: ids.len(), limit: self.max_positions });
            }
            if let Some(id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(EmbedError::Tokenize(format!("token id {id} is outside the vocabulary")));
            }
            spans.push(Span { start: tokens.len(), len: ids.len() });
            tokens.extend(ids.iter().enumerate().map(|(position, &id)| (id as usize, position)));
        }

        let mut states = vec![0f32; tokens.len() * hidden];
        states.par_chunks_mut(hidden).zip(&tokens).with_min_len(ROWS_PER_TASK).for_each(|(row, &(id, position))| {
            let word = &self.word_embeddings[id * hidden..(id + 1) * hidden];
            let place = &self.position_embeddings[position * hidden..(position + 1) * hidden];
            for (((x, w), p), t) in row.iter_mut().zip(word).zip(place).zip(&self.token_type_embedding) {
                *x = w + p + t;
            }
            kernels::layer_norm(row, &self.embedding_norm.weight, &self.embedding_norm.bias, self.eps);
        });

        let mut scratch = Scratch::new(tokens.len(), self.layers.first().map_or(0, |l| l.intermediate.outputs), hidden);
        for layer in &self.layers {
            self.layer(layer, &mut states, &spans, &mut scratch);
        }
        Ok(states)
    }

    fn layer(&self, layer: &Layer, states: &mut [f32], spans: &[Span], scratch: &mut Scratch) {
        let hidden = self.hidden;
        layer.qkv.apply(Mat::rows(states, hidden), &mut scratch.qkv, false);
        self.attention(&scratch.qkv, &mut scratch.context, spans);
        layer.attention_out.apply(Mat::rows(&scratch.context, hidden), states, true);
        self.normalize_rows(states, &layer.attention_norm);

        let inner = layer.intermediate.outputs;
        layer.intermediate.apply(Mat::rows(states, hidden), &mut scratch.inner, false);
        scratch.inner.par_chunks_mut(inner).with_min_len(ROWS_PER_TASK).for_each(kernels::gelu);
        layer.output.apply(Mat::rows(&scratch.inner, inner), states, true);
        self.normalize_rows(states, &layer.output_norm);
    }

    fn normalize_rows(&self, states: &mut [f32], norm: &Norm) {
        states.par_chunks_mut(self.hidden).with_min_len(ROWS_PER_TASK).for_each(|row| {
            kernels::layer_norm(row, &norm.weight, &norm.bias, self.eps);
        });
    }

    /// Scaled dot-product attention of each text over its own tokens, head by head; the texts
    /// run in parallel. `qkv` rows are `[q | k | v]`; `context` gets the heads side by side.
    fn attention(&self, qkv: &[f32], context: &mut [f32], spans: &[Span]) {
        let hidden = self.hidden;
        let width = 3 * hidden;
        let head = hidden / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        let mut per_text = Vec::with_capacity(spans.len());
        let mut rest = context;
        for span in spans {
            let (mine, others) = rest.split_at_mut(span.len * hidden);
            per_text.push((span, mine));
            rest = others;
        }
        per_text.into_par_iter().for_each(|(span, out)| {
            let n = span.len;
            let rows = &qkv[span.start * width..(span.start + n) * width];
            let mut scores = vec![0f32; n * n];
            for h in 0..self.heads {
                let column = h * head;
                let queries = Mat::new(&rows[column..], n, head, width, 1);
                // Keys read column-wise: the transpose without a copy.
                let keys = Mat::new(&rows[hidden + column..], head, n, 1, width);
                let values = Mat::new(&rows[2 * hidden + column..], n, head, width, 1);
                kernels::matmul(MatMut::rows(&mut scores, n), queries, keys, scale, false, Threads::One);
                scores.chunks_exact_mut(n).for_each(kernels::softmax);
                let target = MatMut::new(&mut out[column..], n, head, hidden);
                kernels::matmul(target, Mat::rows(&scores, n), values, 1.0, false, Threads::One);
            }
        });
    }
}

/// Where one text's tokens are among the batch's rows.
struct Span {
    start: usize,
    len: usize,
}

/// The per-layer buffers, allocated once per forward pass.
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    inner: Vec<f32>,
}

impl Scratch {
    fn new(tokens: usize, inner: usize, hidden: usize) -> Scratch {
        Scratch {
            qkv: vec![0f32; tokens * 3 * hidden],
            context: vec![0f32; tokens * hidden],
            inner: vec![0f32; tokens * inner],
        }
    }
}
