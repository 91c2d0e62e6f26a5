//! A proxy between two hosts that records every request it forwards, as anyone on the network
//! between them could: what an attacker holding a captured request would replay.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// One request as it crossed the wire.
#[derive(Debug, Clone)]
pub struct Captured {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

pub struct RecordingProxy {
    /// `http://127.0.0.1:<port>`: point a host's origin variable here.
    pub origin: String,
    captured: Arc<Mutex<Vec<Captured>>>,
}

impl RecordingProxy {
    /// Forwards everything to `target` (an origin such as `http://127.0.0.1:1234`).
    pub async fn start(target: &str) -> Result<RecordingProxy> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let origin = format!("http://{}", listener.local_addr()?);
        let captured = Arc::new(Mutex::new(Vec::new()));
        let (sink, target) = (captured.clone(), Arc::<str>::from(target));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (sink, target) = (sink.clone(), target.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<Incoming>| {
                        let (sink, target) = (sink.clone(), target.clone());
                        async move { Ok::<_, Infallible>(forward(request, &sink, &target).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(RecordingProxy { origin, captured })
    }

    /// Every request forwarded so far, oldest first.
    pub fn captured(&self) -> Vec<Captured> {
        self.captured.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

async fn forward(
    request: hyper::Request<Incoming>,
    sink: &Mutex<Vec<Captured>>,
    target: &str,
) -> hyper::Response<Full<Bytes>> {
    let method = request.method().as_str().to_owned();
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let headers: Vec<(String, Vec<u8>)> =
        request.headers().iter().map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec())).collect();
    let body = request.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    let captured = Captured { method, path, headers, body };
    if let Ok(mut all) = sink.lock() {
        all.push(captured.clone());
    }
    let (status, answer) = send(target, &captured).await.unwrap_or((502, Bytes::from_static(b"{}")));
    let mut response = hyper::Response::new(Full::new(answer));
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::BAD_GATEWAY);
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
    response
}

/// Sends `captured` to `origin` exactly as it was, every header included: a replay.
pub async fn send(origin: &str, captured: &Captured) -> Result<(u16, Bytes)> {
    let method = reqwest::Method::from_bytes(captured.method.as_bytes())?;
    let mut request = reqwest::Client::new().request(method, format!("{origin}{}", captured.path));
    for (name, value) in &captured.headers {
        if !matches!(name.as_str(), "host" | "content-length" | "connection" | "transfer-encoding") {
            request = request.header(name.as_str(), value.as_slice());
        }
    }
    let response = request.body(captured.body.clone()).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.bytes().await?))
}
