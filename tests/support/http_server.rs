//! The small HTTP servers the tests start in place of outside services (a reservation backend,
//! a team's tool host): each request read whole, handed to an async handler, answered.
use std::convert::Infallible;
use std::future::Future;

use anyhow::Result;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// One request, read whole.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    pub path: String,
    /// The request target as it arrived: the path and, when there is one, `?` and the query
    /// (what a signature covers, docs/tools.md, "Signatures").
    pub target: String,
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Exchange {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }
}

/// An answer: JSON, or bytes of another type.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    content_type: &'static str,
    body: Bytes,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::bytes(status, "application/json", body.to_string().into_bytes())
    }

    pub fn bytes(status: u16, content_type: &'static str, body: Vec<u8>) -> Reply {
        Reply { status, content_type, body: Bytes::from(body) }
    }
}

/// Serves `handler` on `address` (`127.0.0.1:0` for a free port) until the test ends; returns
/// the base URL (`http://127.0.0.1:PORT`).
pub async fn serve_on<H, F>(address: &str, handler: H) -> Result<String>
where
    H: Fn(Exchange) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    serve(tokio::net::TcpListener::bind(address).await?, handler)
}

/// [`serve_on`] on a listener already bound (a relay's port of the allowed range,
/// [`crate::relay_listener`]).
pub fn serve<H, F>(listener: tokio::net::TcpListener, handler: H) -> Result<String>
where
    H: Fn(Exchange) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Reply> + Send + 'static,
{
    let url = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<Incoming>| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(respond(handler(read(request).await).await)) }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Ok(url)
}

async fn read(request: hyper::Request<Incoming>) -> Exchange {
    let headers = request
        .headers()
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let target = request.uri().path_and_query().map_or_else(|| path.clone(), |target| target.as_str().to_owned());
    let body = request.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
    Exchange { method, path, target, headers, body }
}

fn respond(reply: Reply) -> hyper::Response<Full<Bytes>> {
    let mut response = hyper::Response::new(Full::new(reply.body));
    *response.status_mut() =
        hyper::StatusCode::from_u16(reply.status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static(reply.content_type));
    response
}
