//! The HTTP listener: HTTP/1.1 with keep-alive, one task per connection.
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Result;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::json;
use tokio::net::TcpListener;

use crate::app::App;

/// How long, once `shutdown` resolved, open connections have to finish the request each is
/// serving. Work a guest goes on with after its answer is not a connection's: the host drains
/// it separately ([`App::drain`]).
const CONNECTION_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Serves until `shutdown` resolves, then stops accepting and closes every connection once the
/// request it is serving has its answer (an idle keep-alive connection at once), so no client
/// sees a request cut off. Call [`App::start_draining`] some time before, so that proxies have
/// stopped sending requests here by then.
pub async fn serve(app: Arc<App>, listener: TcpListener, shutdown: impl Future<Output = ()>) -> Result<()> {
    tokio::pin!(shutdown);
    let connections = GracefulShutdown::new();
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
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let watcher = connections.watcher();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let app = app.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(&app, request, client).await) }
            });
            let connection = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service);
            let served = watcher.watch(connection).await;
            // A client that hangs up mid-request is routine, not worth a warning.
            if let Err(e) = served
                && !e.is_incomplete_message()
            {
                crate::log::warn("connection error", json!({"client": client.to_string(), "error": e.to_string()}));
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(CONNECTION_GRACE, connections.shutdown()).await.is_err() {
        crate::log::warn(
            "connections still open at shutdown were closed",
            json!({"grace_seconds": CONNECTION_GRACE.as_secs()}),
        );
    }
    Ok(())
}

async fn handle(
    app: &App,
    request: hyper::Request<hyper::body::Incoming>,
    client: SocketAddr,
) -> hyper::Response<crate::wasi_http::Body> {
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
