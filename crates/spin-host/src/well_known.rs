//! Spin's reserved routes, `/.well-known/spin/...`, which the host answers itself and no
//! application sees: `health` (200 while the host accepts requests) and `info`. While the host
//! drains before it stops, `health` answers 503, so a proxy or Kubernetes stops sending it new
//! requests before it goes away; everything else is still served meanwhile.

use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::json;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use crate::app::{App, error_response};

/// The prefix Spin reserves for itself.
pub(crate) const PREFIX: &str = "/.well-known/spin/";

/// The host's own answer to a path under [`PREFIX`].
pub(crate) fn answer(app: &App, path: &str) -> Response<HyperOutgoingBody> {
    match path.strip_prefix(PREFIX) {
        Some("health") if app.is_draining() => text(StatusCode::SERVICE_UNAVAILABLE, "draining"),
        Some("health") => text(StatusCode::OK, "OK"),
        Some("info") => {
            let info = json!({
                "application": app.name(),
                "host": concat!("gatehouse-spin-host ", env!("CARGO_PKG_VERSION")),
                "ready": !app.is_draining(),
            });
            let mut response = text(StatusCode::OK, &info.to_string());
            response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        _ => error_response(StatusCode::NOT_FOUND, "not_found", "Nothing is served at this path."),
    }
}

fn text(status: StatusCode, body: &str) -> Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(body.to_owned())).map_err(|never| match never {}).boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}
