//! The wire format of OpenAI's `POST /v1/embeddings`, as its clients send and read it, and its
//! error answer: `{"error": {"message", "type", "param", "code"}}`.

use base64::Engine;
use hyper::StatusCode;
use serde::{Deserialize, Serialize};

use gatehouse_embeddings::{DIMENSIONS, MODEL_NAME};

/// Names a client may give the model by: ours, and the name it has on Hugging Face.
const MODEL_ALIASES: [&str; 3] = [MODEL_NAME, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"];

/// What a request may hold, so that no request costs more than a bounded amount of memory and
/// work (docs/embeddings.md, "Limits").
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Texts in one request (OpenAI's own limit is 2,048).
    pub max_inputs: usize,
    /// Characters in one text. The model reads at most 256 tokens of it (about 1,000 to 1,500
    /// characters of English) and ignores the rest, as sentence-transformers does.
    pub max_input_chars: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_inputs: 2048, max_input_chars: 32_768 }
    }
}

#[derive(Debug, Deserialize)]
pub struct EmbeddingsRequest {
    pub input: Input,
    pub model: String,
    #[serde(default)]
    pub encoding_format: Option<String>,
    #[serde(default)]
    pub dimensions: Option<u64>,
}

/// `input` in each shape OpenAI accepts. Token ids are another model's tokens: refused.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Input {
    Text(String),
    Texts(Vec<String>),
    TokenIds(Vec<u64>),
    TokenIdLists(Vec<Vec<u64>>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Float,
    /// Each vector's little-endian `f32`s, base64-encoded: what OpenAI's Python client asks for
    /// by default.
    Base64,
}

/// A request that passed every check: the texts to embed and how to write the vectors.
#[derive(Debug)]
pub struct Checked {
    pub texts: Vec<String>,
    pub encoding: Encoding,
}

impl EmbeddingsRequest {
    pub fn check(self, limits: Limits) -> Result<Checked, ApiError> {
        if !MODEL_ALIASES.contains(&self.model.as_str()) {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "model_not_found",
                Some("model"),
                format!("The model `{}` does not exist here; this server has `{MODEL_NAME}`.", truncated(&self.model)),
            ));
        }
        let encoding = match self.encoding_format.as_deref() {
            None | Some("float") => Encoding::Float,
            Some("base64") => Encoding::Base64,
            Some(other) => {
                return Err(ApiError::invalid(
                    "invalid_encoding_format",
                    "encoding_format",
                    format!("encoding_format is `{}`; expected `float` or `base64`.", truncated(other)),
                ));
            }
        };
        if let Some(dimensions) = self.dimensions
            && dimensions != DIMENSIONS as u64
        {
            return Err(ApiError::invalid(
                "unsupported_dimensions",
                "dimensions",
                format!(
                    "This model's vectors have {DIMENSIONS} dimensions and cannot be shortened; asked for {dimensions}."
                ),
            ));
        }
        let texts = match self.input {
            Input::Text(text) => vec![text],
            Input::Texts(texts) => texts,
            Input::TokenIds(_) | Input::TokenIdLists(_) => {
                return Err(ApiError::invalid(
                    "unsupported_input",
                    "input",
                    "input as token ids is not supported: send the text.".to_owned(),
                ));
            }
        };
        if texts.is_empty() {
            return Err(ApiError::invalid("invalid_input", "input", "input holds no text.".to_owned()));
        }
        if texts.len() > limits.max_inputs {
            return Err(ApiError::invalid(
                "too_many_inputs",
                "input",
                format!("input holds {} texts; at most {} are allowed in one request.", texts.len(), limits.max_inputs),
            ));
        }
        for (index, text) in texts.iter().enumerate() {
            if text.trim().is_empty() {
                return Err(ApiError::invalid("invalid_input", "input", format!("input[{index}] is empty.")));
            }
            if text.chars().count() > limits.max_input_chars {
                return Err(ApiError::invalid(
                    "input_too_long",
                    "input",
                    format!("input[{index}] is longer than {} characters.", limits.max_input_chars),
                ));
            }
        }
        Ok(Checked { texts, encoding })
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EmbeddingsResponse {
    pub object: String,
    pub data: Vec<EmbeddingData>,
    pub model: String,
    pub usage: Usage,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct EmbeddingData {
    pub object: String,
    pub index: usize,
    pub embedding: Vector,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Vector {
    Float(Vec<f32>),
    Base64(String),
}

impl Vector {
    pub fn encode(vector: Vec<f32>, encoding: Encoding) -> Vector {
        match encoding {
            Encoding::Float => Vector::Float(vector),
            Encoding::Base64 => {
                let bytes: Vec<u8> = vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                Vector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            }
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

impl EmbeddingsResponse {
    pub fn new(vectors: Vec<Vec<f32>>, tokens: usize, encoding: Encoding) -> EmbeddingsResponse {
        let data = vectors
            .into_iter()
            .enumerate()
            .map(|(index, vector)| EmbeddingData {
                object: "embedding".to_owned(),
                index,
                embedding: Vector::encode(vector, encoding),
            })
            .collect();
        EmbeddingsResponse {
            object: "list".to_owned(),
            data,
            model: MODEL_NAME.to_owned(),
            usage: Usage { prompt_tokens: tokens, total_tokens: tokens },
        }
    }
}

/// `GET /v1/models`.
pub fn models() -> serde_json::Value {
    serde_json::json!({
        "object": "list",
        "data": [{"id": MODEL_NAME, "object": "model", "created": 0, "owned_by": "gatehouse"}]
    })
}

/// An answer other than 200, in OpenAI's shape, with a stable `code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub param: Option<&'static str>,
    pub message: String,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorFields<'a>,
}

#[derive(Serialize)]
struct ErrorFields<'a> {
    message: &'a str,
    r#type: &'static str,
    param: Option<&'static str>,
    code: &'static str,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, param: Option<&'static str>, message: String) -> ApiError {
        ApiError { status, code, param, message }
    }

    fn invalid(code: &'static str, param: &'static str, message: String) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, Some(param), message)
    }

    /// OpenAI's `type`: what kind of fault, by status.
    fn kind(&self) -> &'static str {
        match self.status {
            StatusCode::UNAUTHORIZED => "authentication_error",
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => "server_overloaded",
            status if status.is_server_error() => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn body(&self) -> String {
        let body = ErrorBody {
            error: ErrorFields { message: &self.message, r#type: self.kind(), param: self.param, code: self.code },
        };
        serde_json::to_string(&body).unwrap_or_default()
    }
}

/// A client's value quoted in an error, cut short.
fn truncated(value: &str) -> String {
    const QUOTED: usize = 64;
    match value.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: serde_json::Value) -> Result<Checked, ApiError> {
        serde_json::from_value::<EmbeddingsRequest>(body)
            .map_err(|e| panic!("{e}"))
            .and_then(|r| r.check(Limits::default()))
    }

    #[test]
    fn takes_one_text_or_a_list_under_any_of_the_models_names() {
        let one = request(serde_json::json!({"model": "all-minilm-l6-v2", "input": "late trucks"})).unwrap();
        assert_eq!((one.texts, one.encoding), (vec!["late trucks".to_owned()], Encoding::Float));
        let many = request(serde_json::json!({
            "model": "sentence-transformers/all-MiniLM-L6-v2", "input": ["a", "b"], "encoding_format": "base64",
            "dimensions": 384, "user": "someone"
        }))
        .unwrap();
        assert_eq!((many.texts.len(), many.encoding), (2, Encoding::Base64));
    }

    #[test]
    fn refuses_each_bad_shape_with_its_own_code() {
        let code = |body: serde_json::Value| request(body).unwrap_err().code;
        assert_eq!(code(serde_json::json!({"model": "text-embedding-3-small", "input": "x"})), "model_not_found");
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": [1, 2, 3]})), "unsupported_input");
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": [[1], [2]]})), "unsupported_input");
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": []})), "invalid_input");
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": ["ok", "  "]})), "invalid_input");
        assert_eq!(
            code(serde_json::json!({"model": MODEL_NAME, "input": "x", "dimensions": 256})),
            "unsupported_dimensions"
        );
        assert_eq!(
            code(serde_json::json!({"model": MODEL_NAME, "input": "x", "encoding_format": "hex"})),
            "invalid_encoding_format"
        );
        let many = vec!["x"; 2049];
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": many})), "too_many_inputs");
        let long = "x".repeat(32_769);
        assert_eq!(code(serde_json::json!({"model": MODEL_NAME, "input": long})), "input_too_long");
    }

    #[test]
    fn base64_holds_the_little_endian_floats() {
        let Vector::Base64(text) = Vector::encode(vec![1.0, -0.5], Encoding::Base64) else { panic!("not base64") };
        let bytes = base64::engine::general_purpose::STANDARD.decode(text).unwrap();
        assert_eq!(bytes, [1.0f32.to_le_bytes(), (-0.5f32).to_le_bytes()].concat());
    }

    #[test]
    fn an_error_is_in_openais_shape() {
        let error = ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", None, "Incorrect API key.".into());
        let body: serde_json::Value = serde_json::from_str(&error.body()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"error": {"message": "Incorrect API key.", "type": "authentication_error",
                                          "param": null, "code": "invalid_api_key"}})
        );
    }
}
