//! Turning the query into a vector: Spin's LLM interface by default, or an OpenAI-compatible
//! `/v1/embeddings` endpoint. Which one is configuration (`embeddings_provider`); each has one
//! code path, and nothing else in the search depends on the choice.
//!
//! Either way the vector must come from the model the documents were ingested with,
//! all-MiniLM-L6-v2, or the distances mean nothing: an OpenAI-compatible server must serve
//! that model (for example a local embeddings server), not OpenAI's own models.

use std::time::Duration;

use gatehouse_platform::Method;
use serde::Deserialize;
use serde_json::json;
use spin_sdk::llm;

use crate::SearchError;

/// The width of `documents.embedding`.
pub const DIMENSIONS: usize = 384;
/// How long the OpenAI-compatible endpoint may take for one short query.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, PartialEq, Eq)]
pub enum Embedder {
    /// `fermyon:spin/llm` `generate-embeddings` with all-minilm-l6-v2, run by the host.
    Spin,
    /// `POST {url}` with `{model, input}` and `Authorization: Bearer {api_key}`.
    OpenAi { url: String, model: String, api_key: String },
}

// The API key must never reach a log line.
impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Embedder::Spin => f.write_str("Spin"),
            Embedder::OpenAi { url, model, .. } => write!(f, "OpenAi {{ url: {url:?}, model: {model:?} }}"),
        }
    }
}

impl Embedder {
    /// From the `embeddings_*` variables; the remote ones are read only when selected.
    pub fn from_variables() -> Result<Embedder, SearchError> {
        match crate::variable("embeddings_provider")?.trim() {
            "" | "spin" => Ok(Embedder::Spin),
            "openai" => Ok(Embedder::OpenAi {
                url: crate::variable("embeddings_url")?,
                model: crate::variable("embeddings_model")?,
                api_key: crate::variable("embeddings_api_key")?,
            }),
            other => {
                Err(SearchError::Config(format!("embeddings_provider is {other:?}; expected \"spin\" or \"openai\"")))
            }
        }
    }

    /// One text per call: Spin's local embedding pools over padding, so in a batch each vector
    /// would depend on the other texts (docs/architecture.md, "Vector search").
    pub async fn embed(&self, text: &str) -> Result<Vec<f32>, SearchError> {
        let vector = match self {
            Embedder::Spin => {
                let result = llm::generate_embeddings(llm::EmbeddingModel::AllMiniLmL6V2, &[text.to_owned()])
                    .map_err(|e| SearchError::Embedding(format!("generate-embeddings: {e:?}")))?;
                result.embeddings.into_iter().next()
            }
            Embedder::OpenAi { url, model, api_key } => remote(url, model, api_key, text).await?,
        };
        let vector = vector.ok_or_else(|| SearchError::Embedding("no embedding came back".into()))?;
        if vector.len() != DIMENSIONS {
            return Err(SearchError::Embedding(format!(
                "the model answered {} dimensions; the documents have {DIMENSIONS}",
                vector.len()
            )));
        }
        if vector.iter().any(|x| !x.is_finite()) {
            return Err(SearchError::Embedding("the embedding holds a value that is not a number".into()));
        }
        Ok(vector)
    }
}

#[derive(Deserialize)]
struct EmbeddingsAnswer {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    embedding: Vec<f32>,
}

async fn remote(url: &str, model: &str, api_key: &str, text: &str) -> Result<Option<Vec<f32>>, SearchError> {
    let body = json!({"model": model, "input": text}).to_string().into_bytes();
    let authorization = format!("Bearer {api_key}");
    let mut headers = vec![("content-type", "application/json")];
    if !api_key.is_empty() {
        headers.push(("authorization", authorization.as_str()));
    }
    let answer = gatehouse_platform::send(Method::Post, url, &headers, body, REMOTE_TIMEOUT)
        .await
        .map_err(|e| SearchError::Embedding(format!("{url}: {e}")))?;
    // The body of an error answer is not repeated: some services quote the key back in it.
    if !answer.is_success() {
        return Err(SearchError::Embedding(format!("{url} answered HTTP {}", answer.status)));
    }
    let parsed: EmbeddingsAnswer = serde_json::from_slice(&answer.body)
        .map_err(|e| SearchError::Embedding(format!("{url} answered something that is not an embeddings list: {e}")))?;
    Ok(parsed.data.into_iter().next().map(|item| item.embedding))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_prints_the_key() {
        let embedder = Embedder::OpenAi {
            url: "http://127.0.0.1:9/v1/embeddings".into(),
            model: "m".into(),
            api_key: "sk-secret".into(),
        };
        assert!(!format!("{embedder:?}").contains("sk-secret"));
    }
}
