//! The BERT encoder all-MiniLM-L6-v2 is (embeddings, then six layers of self-attention and a
//! feed-forward block), run over the texts of a batch packed one after another: every row is a
//! real token, so no work goes to padding and no attention mask is needed. Each text attends
//! only to its own tokens, so a text's vector does not depend on the texts beside it.
//!
//! Per layer, four products carry nearly all the arithmetic: the fused query/key/value
//! projection, the attention output and the two feed-forward products. A pass runs them over
//! all its tokens at once, on one thread (the embedder runs passes side by side, one per core)
//! or, for a pass alone, on every core. The residual is accumulated into by the product itself;
//! each bias is added by the step that reads the product next, row by row while the row is in
//! cache; GELU and layer norm work in place.

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

    /// `out = input × weight`, or `out += input × weight` onto a residual already in `out`.
    /// The bias is left to the step that reads `out` next ([`Linear::add_bias`]), which adds it
    /// to a row while the row is in cache instead of in a pass of its own.
    fn product(&self, input: Mat<'_>, out: &mut [f32], onto_residual: bool, threads: Threads) {
        kernels::matmul(MatMut::rows(out, self.outputs), input, self.weight(), 1.0, onto_residual, threads);
    }

    fn add_bias(&self, row: &mut [f32]) {
        row.iter_mut().zip(&self.bias).for_each(|(x, b)| *x += b);
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

/// `work(index, row)` for each `width`-wide row of `rows`, spread over the pool or not.
fn for_each_row(rows: &mut [f32], width: usize, threads: Threads, work: impl Fn(usize, &mut [f32]) + Sync + Send) {
    match threads {
        Threads::All => {
            rows.par_chunks_mut(width).enumerate().with_min_len(ROWS_PER_TASK).for_each(|(i, row)| work(i, row))
        }
        Threads::One => rows.chunks_mut(width).enumerate().for_each(|(i, row)| work(i, row)),
    }
}

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
    pub(crate) fn forward<'b>(
        &self,
        texts: &[&[u32]],
        threads: Threads,
        buffers: &'b mut Buffers,
    ) -> Result<&'b [f32], EmbedError> {
        let hidden = self.hidden;
        let mut lengths = Vec::with_capacity(texts.len());
        let mut tokens = Vec::new();
        for ids in texts {
            if ids.len() > self.max_positions {
                return Err(EmbedError::TooLong { tokens: ids.len(), limit: self.max_positions });
            }
            if let Some(id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
                return Err(EmbedError::Tokenize(format!("token id {id} is outside the vocabulary")));
            }
            lengths.push(ids.len());
            tokens.extend(ids.iter().enumerate().map(|(position, &id)| (id as usize, position)));
        }

        let inner = self.layers.first().map_or(0, |l| l.intermediate.outputs);
        buffers.fit(tokens.len(), inner, hidden);
        let Buffers { states, scratch } = buffers;
        for_each_row(states, hidden, threads, |i, row| {
            let (id, position) = tokens[i];
            let word = &self.word_embeddings[id * hidden..(id + 1) * hidden];
            let place = &self.position_embeddings[position * hidden..(position + 1) * hidden];
            for (((x, w), p), t) in row.iter_mut().zip(word).zip(place).zip(&self.token_type_embedding) {
                *x = w + p + t;
            }
            kernels::layer_norm(row, &self.embedding_norm.weight, &self.embedding_norm.bias, self.eps);
        });

        for layer in &self.layers {
            self.layer(layer, states, &lengths, scratch, threads);
        }
        Ok(states)
    }

    fn layer(&self, layer: &Layer, states: &mut [f32], lengths: &[usize], scratch: &mut Scratch, threads: Threads) {
        let hidden = self.hidden;
        layer.qkv.product(Mat::rows(states, hidden), &mut scratch.qkv, false, threads);
        self.attention(&layer.qkv, &mut scratch.qkv, &mut scratch.context, lengths, threads);
        layer.attention_out.product(Mat::rows(&scratch.context, hidden), states, true, threads);
        self.normalize_rows(states, &layer.attention_out, &layer.attention_norm, threads);

        let inner = &layer.intermediate;
        inner.product(Mat::rows(states, hidden), &mut scratch.inner, false, threads);
        for_each_row(&mut scratch.inner, inner.outputs, threads, |_, row| {
            inner.add_bias(row);
            kernels::gelu(row);
        });
        layer.output.product(Mat::rows(&scratch.inner, inner.outputs), states, true, threads);
        self.normalize_rows(states, &layer.output, &layer.output_norm, threads);
    }

    /// Adds the bias of the product that just wrote `states`, then layer-normalizes each row.
    fn normalize_rows(&self, states: &mut [f32], product: &Linear, norm: &Norm, threads: Threads) {
        for_each_row(states, self.hidden, threads, |_, row| {
            product.add_bias(row);
            kernels::layer_norm(row, &norm.weight, &norm.bias, self.eps);
        });
    }

    /// Scaled dot-product attention of each text over its own tokens, head by head. `qkv` rows
    /// are `[q | k | v]` without `projection`'s bias, which is added to a text's rows first;
    /// `context` gets the heads side by side.
    fn attention(
        &self,
        projection: &Linear,
        qkv: &mut [f32],
        context: &mut [f32],
        lengths: &[usize],
        threads: Threads,
    ) {
        let hidden = self.hidden;
        let width = 3 * hidden;
        let head = hidden / self.heads;
        let scale = 1.0 / (head as f32).sqrt();
        let mut per_text = Vec::with_capacity(lengths.len());
        let (mut context_rest, mut qkv_rest) = (context, qkv);
        for &n in lengths {
            let (out, others) = context_rest.split_at_mut(n * hidden);
            context_rest = others;
            let (rows, others) = qkv_rest.split_at_mut(n * width);
            qkv_rest = others;
            per_text.push((n, rows, out));
        }
        let attend = |(n, rows, out): (usize, &mut [f32], &mut [f32])| {
            rows.chunks_exact_mut(width).for_each(|row| projection.add_bias(row));
            let rows = &*rows;
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
        };
        match threads {
            Threads::All => per_text.into_par_iter().for_each(attend),
            Threads::One => per_text.into_iter().for_each(attend),
        }
    }
}

/// A forward pass's memory: the token states it returns and the per-layer scratch. Kept
/// from pass to pass by whoever runs them, so a pass does not fault in fresh pages (tens of
/// megabytes for a full pass). Every element is written before it is read, so resizing
/// leaves old values in place.
#[derive(Default)]
pub(crate) struct Buffers {
    states: Vec<f32>,
    scratch: Scratch,
}

#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    inner: Vec<f32>,
}

impl Buffers {
    fn fit(&mut self, tokens: usize, inner: usize, hidden: usize) {
        self.states.resize(tokens * hidden, 0.0);
        self.scratch.qkv.resize(tokens * 3 * hidden, 0.0);
        self.scratch.context.resize(tokens * hidden, 0.0);
        self.scratch.inner.resize(tokens * inner, 0.0);
    }
}
