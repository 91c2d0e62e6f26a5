//! An OpenAI-compatible embeddings server over the project's own all-MiniLM-L6-v2
//! (`gatehouse embeddings serve`), for Spin hosts that have no local model: SpinKube's shim runs
//! none, and Akamai Functions and Fermyon Cloud ration theirs. The vector tool's
//! `embeddings_provider = "openai"` points at it (docs/embeddings.md).
//!
//! - `POST /v1/embeddings`: `{"model", "input": text or [texts], "encoding_format"?,
//!   "dimensions"?}`, answered as OpenAI answers, with the runner's and `gatehouse ingest`'s
//!   vectors (the same crate computes them; a batch changes them by float rounding at most).
//! - `GET /v1/models`: the one model.
//! - `GET /healthz`: 200 while serving, without a token, for probes.
//!
//! Every other route wants `Authorization: Bearer <token>`. Concurrent requests are embedded
//! together ([`batch`]).

mod batch;
pub mod openai;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use gatehouse_http_listener::{Answer, Serving};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;

pub use batch::{BatchError, Batcher};
use gatehouse_embeddings::Embedder;
use openai::{ApiError, EmbeddingsRequest, EmbeddingsResponse, Limits};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The bearer token every client sends. Never logged, never answered.
    pub token: String,
    pub limits: Limits,
    /// Most texts embedded in one batch.
    pub max_batch_texts: usize,
    /// Most requests waiting for the model; more are refused with 503 at once.
    pub queue: usize,
    /// Largest request body.
    pub max_body_bytes: usize,
}

impl Config {
    pub fn new(token: String) -> Config {
        Config { token, limits: Limits::default(), max_batch_texts: 256, queue: 64, max_body_bytes: 2 * 1024 * 1024 }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the token is empty: clients would be let in without one")]
    NoToken,
    #[error("listening on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("starting the embedding thread: {0}")]
    Thread(std::io::Error),
}

/// A server accepting connections until [`Server::stop`].
pub struct Server {
    pub addr: SocketAddr,
    serving: Serving,
}

impl Server {
    /// Binds `listen` and serves `embedder` on it.
    pub async fn start(listen: SocketAddr, embedder: Arc<Embedder>, config: Config) -> Result<Server, ServeError> {
        if config.token.is_empty() {
            return Err(ServeError::NoToken);
        }
        let listener = TcpListener::bind(listen).await.map_err(|source| ServeError::Listen { addr: listen, source })?;
        let addr = listener.local_addr().map_err(|source| ServeError::Listen { addr: listen, source })?;
        let batcher = Batcher::start(embedder, config.max_batch_texts, config.queue).map_err(ServeError::Thread)?;
        let shared = Arc::new(Shared { batcher, config });
        let serving = gatehouse_http_listener::serve(listener, move |request| {
            let shared = shared.clone();
            async move { answer(&shared, request).await }
        });
        Ok(Server { addr, serving })
    }

    /// `http://ADDR/v1/embeddings`.
    pub fn embeddings_url(&self) -> String {
        format!("http://{}/v1/embeddings", self.addr)
    }

    /// Stops accepting, lets the requests in flight finish, and returns.
    pub async fn stop(self) {
        self.serving.stop().await;
    }
}

struct Shared {
    batcher: Batcher,
    config: Config,
}

async fn answer(shared: &Shared, request: Request<Incoming>) -> Answer {
    match route(shared, request).await {
        Ok(body) => json(StatusCode::OK, body),
        Err(error) => json(error.status, error.body()),
    }
}

async fn route(shared: &Shared, request: Request<Incoming>) -> Result<String, ApiError> {
    let (method, path) = (request.method().clone(), request.uri().path().to_owned());
    match (method, path.as_str()) {
        (Method::GET, "/healthz") => Ok(r#"{"status":"ok"}"#.to_owned()),
        (Method::POST, "/v1/embeddings") => {
            authorize(&shared.config, &request)?;
            embeddings(shared, request).await
        }
        (Method::GET, "/v1/models") => {
            authorize(&shared.config, &request)?;
            Ok(openai::models().to_string())
        }
        (_, "/healthz" | "/v1/embeddings" | "/v1/models") => Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            None,
            format!("{path} does not take this method."),
        )),
        _ => Err(ApiError::new(StatusCode::NOT_FOUND, "not_found", None, "No such route.".to_owned())),
    }
}

/// The bearer token, compared in constant time.
fn authorize(config: &Config, request: &Request<Incoming>) -> Result<(), ApiError> {
    let presented = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or_default();
    if bool::from(presented.as_bytes().ct_eq(config.token.as_bytes())) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNAUTHORIZED,
        "invalid_api_key",
        None,
        "Incorrect or missing API key: send `Authorization: Bearer <token>`.".to_owned(),
    ))
}

async fn embeddings(shared: &Shared, request: Request<Incoming>) -> Result<String, ApiError> {
    let limit = shared.config.max_body_bytes;
    let bytes = Limited::new(request.into_body(), limit).collect().await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            None,
            format!("The request body is larger than {limit} bytes, or was cut off."),
        )
    })?;
    let request: EmbeddingsRequest = serde_json::from_slice(&bytes.to_bytes()).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_json",
            None,
            format!("The body is not an embeddings request: {e}."),
        )
    })?;
    let checked = request.check(shared.config.limits)?;
    let embedded = shared.batcher.embed(checked.texts).await.map_err(batch_refusal)?;
    let response = EmbeddingsResponse::new(embedded.vectors, embedded.tokens, checked.encoding);
    serde_json::to_string(&response).map_err(|e| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "embedding_failed", None, format!("Writing the answer: {e}."))
    })
}

/// Why the batcher did not embed a request, as the client's answer.
fn batch_refusal(error: BatchError) -> ApiError {
    match error {
        BatchError::Busy => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded",
            None,
            "The server has more requests waiting than it takes; retry shortly.".to_owned(),
        ),
        BatchError::Stopped => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "stopping", None, "The server is stopping.".to_owned())
        }
        BatchError::Embed(error) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "embedding_failed",
            Some("input"),
            format!("The model could not embed the input: {error}."),
        ),
    }
}

/// Every answer: a 503 (the queue is full, the server is stopping) says when to try again, as
/// every 503 and 429 of Gatehouse does (`gatehouse_domain::retry_after`).
fn json(status: StatusCode, body: String) -> Answer {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(seconds) = gatehouse_domain::retry_after(status.as_u16()) {
        response.headers_mut().insert(RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry_after(answer: &Answer) -> Option<&str> {
        answer.headers().get(RETRY_AFTER).and_then(|value| value.to_str().ok())
    }

    #[test]
    fn a_refusal_for_load_says_when_to_try_again() {
        for (refused, code) in [(BatchError::Busy, "overloaded"), (BatchError::Stopped, "stopping")] {
            let error = batch_refusal(refused);
            assert_eq!(error.code, code);
            let answer = json(error.status, error.body());
            assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(retry_after(&answer), Some(gatehouse_domain::RETRY_AFTER_SECONDS), "{code}");
        }
        let refused = ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", None, "no".to_owned());
        assert_eq!(retry_after(&json(refused.status, refused.body())), None);
    }
}
