//! Spin's reserved routes, `/.well-known/spin/...`, which the host answers itself and no
//! application sees: `health` (200 while the host accepts requests) and `info`. While the host
//! drains before it stops, `health` answers 503, so a proxy or Kubernetes stops sending it new
//! requests before it goes away; everything else is still served meanwhile.

use http::{Response, StatusCode};
use serde_json::json;

use crate::app::{App, error_response, host_response};
use crate::wasi_http::Body;

const TEXT: &str = "text/plain";

/// The prefix Spin reserves for itself.
pub(crate) const PREFIX: &str = "/.well-known/spin/";

/// The host's own answer to a path under [`PREFIX`].
pub(crate) fn answer(app: &App, path: &str) -> Response<Body> {
    match path.strip_prefix(PREFIX) {
        Some("health") if app.is_draining() => host_response(StatusCode::SERVICE_UNAVAILABLE, TEXT, "draining".into()),
        Some("health") => host_response(StatusCode::OK, TEXT, "OK".into()),
        Some("info") => {
            let info = json!({
                "application": app.name(),
                "host": concat!("gatehouse-spin-host ", env!("CARGO_PKG_VERSION")),
                "wasmtime": env!("GATEHOUSE_WASMTIME_VERSION"),
                "ready": !app.is_draining(),
            });
            host_response(StatusCode::OK, "application/json", info.to_string())
        }
        _ => error_response(StatusCode::NOT_FOUND, "not_found", "Nothing is served at this path."),
    }
}
