//! The HTTP listener: HTTP/1.1 with keep-alive, one task per connection.
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

use crate::app::App;

/// Serves until `shutdown` resolves. Requests already running finish on their own tasks.
pub async fn serve(app: Arc<App>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<()> {
    tokio::pin!(shutdown);
    loop {
        let (stream, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Running out of file descriptors must not stop the server for good.
                    crate::log::warn("accept failed", json!({"error": e.to_string()}));
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let app = app.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&app, request, client).await) }
            });
            let served = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service).await;
            // A client that hangs up mid-request is routine, not worth a warning.
            if let Err(e) = served
                && !e.is_incomplete_message()
            {
                crate::log::warn("connection error", json!({"client": client.to_string(), "error": e.to_string()}));
            }
        });
    }
}

async fn handle(
    app: &App,
    request: hyper::Request<hyper::body::Incoming>,
    client: SocketAddr,
) -> hyper::Response<wasmtime_wasi_http::p2::body::HyperOutgoingBody> {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = app.handle_inbound(request, client).await;
    if !crate::log::debug_enabled() {
        return response;
    }
    crate::log::event(
        "debug",
        "request",
        json!({
            "method": method.as_str(),
            "route": path,
            "status": response.status().as_u16(),
            "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
        }),
    );
    response
}
