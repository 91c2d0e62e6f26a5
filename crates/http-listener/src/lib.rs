//! An HTTP/1.1 server on a listener, for the runner side's own small servers (`gatehouse
//! embeddings serve`, the Gmail stand-in): it accepts connections until told to stop and
//! answers each request with a handler. A stop closes the idle keep-alive connections at once
//! and lets each request in flight get its answer. (The Spin host's server, with its routing
//! and limits, is `gatehouse-spin-host`'s own.)

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What a handler answers.
pub type Answer = Response<Full<Bytes>>;

/// A server accepting on its listener until [`Serving::stop`].
pub struct Serving {
    stop: watch::Sender<bool>,
    accept_loop: JoinHandle<()>,
}

impl Serving {
    /// Stops accepting, without waiting.
    pub fn signal_stop(&self) {
        let _ = self.stop.send(true);
    }

    /// Stops accepting and returns once every request in flight has its answer.
    pub async fn stop(self) {
        self.signal_stop();
        let _ = self.accept_loop.await;
    }
}

/// Serves `listener` with `handler` on the current Tokio runtime.
pub fn serve<H, F>(listener: TcpListener, handler: H) -> Serving
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Answer> + Send + 'static,
{
    let (stop, stopped) = watch::channel(false);
    let accept_loop = tokio::spawn(accept(listener, handler, stopped));
    Serving { stop, accept_loop }
}

async fn accept<H, F>(listener: TcpListener, handler: H, mut stopped: watch::Receiver<bool>)
where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Answer> + Send + 'static,
{
    let connections = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, say: wait a little rather than stop serving.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stop_requested(&mut stopped) => break,
        };
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let service = service_fn(move |request| {
            let answer = handler(request);
            async move { Ok::<_, Infallible>(answer.await) }
        });
        let connection = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service);
        let connection = connections.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
        });
    }
    drop(listener);
    connections.shutdown().await;
}

/// The watch's guard is not `Send`: dropped here, before the accept loop goes on.
async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}
