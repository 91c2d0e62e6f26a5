//! The HTTP listener: HTTP/1.1 with keep-alive, one task per connection, and the limits that
//! keep slow or greedy clients from holding the host: a time to send the request's head and
//! one to send its body, a cap on connections open at once and on requests per connection.
//!
//! Spin's own listener (3.6 and 4.0) sets none of these: its hyper server has no timer, so no
//! header timeout, and it takes every connection. Behind Spin, a proxy in front must set them
//! (docs/deploying.md, "Slow clients").
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Result;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::app::App;

/// How long, once `shutdown` resolved, open connections have to finish the request each is
/// serving. Work a guest goes on with after its answer is not a connection's: the host drains
/// it separately ([`App::drain`]).
const CONNECTION_GRACE: Duration = Duration::from_secs(10);

/// What one client may take of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// From the moment a connection may send a request's head (its first, or the next on a
    /// kept-alive connection) until the head has arrived; past it the connection is closed.
    pub header_read_timeout: Duration,
    /// From the head's arrival until the whole body has; past it the request gets 408.
    pub body_read_timeout: Duration,
    /// Connections open at once; more wait in the listener's backlog until one closes.
    pub max_connections: usize,
    /// Requests one connection may make; the last one's answer closes it.
    pub max_requests_per_connection: usize,
}

impl Default for ConnectionLimits {
    fn default() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_requests_per_connection: 1000,
        }
    }
}

/// Serves until `shutdown` resolves, then stops accepting and closes every connection once the
/// request it is serving has its answer (an idle keep-alive connection at once), so no client
/// sees a request cut off. Call [`App::start_draining`] some time before, so that proxies have
/// stopped sending requests here by then.
pub async fn serve(
    app: Arc<App>,
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    tokio::pin!(shutdown);
    let connections = GracefulShutdown::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_closed) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // Running out of file descriptors must not stop the server for good.
                    crate::log::warn("accept failed", json!({"error": e.to_string()}));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let watcher = connections.watcher();
        tokio::spawn(async move {
            let served = Arc::new(AtomicUsize::new(0));
            let service = service_fn(move |request| {
                let app = app.clone();
                let count = served.fetch_add(1, Ordering::Relaxed) + 1;
                async move {
                    let mut response = handle(&app, request, client, limits.body_read_timeout).await;
                    if count >= limits.max_requests_per_connection {
                        // hyper closes the connection once this answer is written.
                        response
                            .headers_mut()
                            .insert(http::header::CONNECTION, http::HeaderValue::from_static("close"));
                    }
                    Ok::<_, std::convert::Infallible>(response)
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service);
            let served = watcher.watch(connection).await;
            drop(slot);
            // A client that hangs up mid-request, or is too slow with its head, is routine.
            if let Err(e) = served
                && !e.is_incomplete_message()
                && !e.is_timeout()
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
    body_read_timeout: Duration,
) -> hyper::Response<crate::wasi_http::Body> {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = app.handle_inbound(request, client, body_read_timeout).await;
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
