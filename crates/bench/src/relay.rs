//! A relay for the CLI's own use (`demo`, `bench`): an HTTP server on loopback that receives
//! Gatehouse's callbacks, checks their signatures, and answers every gate with "continue".

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use serde_json::Value;

/// One callback as it arrived.
#[derive(Debug, Clone)]
pub struct Callback {
    /// `progress`, `checkpoint` or `completion` (the `X-Gatehouse-Callback` header).
    pub kind: String,
    pub body: Value,
    /// Whether `X-Gatehouse-Signature` verified with the relay's secret.
    pub signature_valid: bool,
    pub at: Instant,
}

/// Where the CLI's relay listens unless told otherwise, and what `gatehouse up` allows callbacks
/// to when nothing else is configured: one named port, never a loopback wildcard.
pub const LOCAL_RELAY: std::net::SocketAddr =
    std::net::SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 3001));

pub struct Relay {
    pub url: String,
    received: Arc<Mutex<Vec<Callback>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Relay {
    /// Listens on `listen` (port 0 picks a free one); signatures are checked with `secret`.
    pub async fn start(secret: &str, listen: std::net::SocketAddr) -> Result<Relay> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("the relay cannot listen on {listen}: {e}"))?;
        let url = format!("http://{}/callbacks", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let (sink, secret) = (received.clone(), Arc::<str>::from(secret));
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (sink, secret) = (sink.clone(), secret.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
                        let (sink, secret) = (sink.clone(), secret.clone());
                        async move { Ok::<_, Infallible>(receive(request, &sink, &secret).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Relay { url, received, server })
    }

    pub(crate) fn received(&self) -> Vec<Callback> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The first callback about each call whose id starts with `prefix`: when it came, and
    /// whether its signature verified.
    pub(crate) fn first_callbacks(&self, prefix: &str) -> std::collections::HashMap<String, (Instant, bool)> {
        let mut first = std::collections::HashMap::new();
        if let Ok(received) = self.received.lock() {
            for callback in received.iter() {
                if let Some(id) = callback.body["tool_call_id"].as_str().filter(|id| id.starts_with(prefix)) {
                    first.entry(id.to_owned()).or_insert((callback.at, callback.signature_valid));
                }
            }
        }
        first
    }

    /// Waits for a callback of `kind` about `tool_call_id`.
    pub async fn wait_for(&self, tool_call_id: &str, kind: &str, timeout: Duration) -> Result<Callback> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.received().into_iter().find(|c| c.kind == kind && c.body["tool_call_id"] == tool_call_id);
            if let Some(callback) = found {
                return Ok(callback);
            }
            if Instant::now() > deadline {
                bail!("no {kind} callback for {tool_call_id} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    request: hyper::Request<Incoming>,
    sink: &Mutex<Vec<Callback>>,
    secret: &str,
) -> hyper::Response<Full<Bytes>> {
    let at = Instant::now();
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (kind, signature) = (header("x-gatehouse-callback").unwrap_or_default(), header("x-gatehouse-signature"));
    let target = request.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let signature_valid =
        gatehouse_domain::callback::verify(&[secret.as_bytes()], signature.as_deref(), &target, &body, now).is_ok();
    let callback = Callback { kind, body: serde_json::from_slice(&body).unwrap_or(Value::Null), signature_valid, at };
    if let Ok(mut received) = sink.lock() {
        received.push(callback);
    }
    let mut response = hyper::Response::new(Full::new(Bytes::from_static(br#"{"continue":true}"#)));
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}
