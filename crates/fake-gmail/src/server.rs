//! The HTTP/1.1 listener and the path of every request: read it, name its operation, apply an
//! armed fault, answer, record.
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Limited};
use hyper::Request;
use hyper::body::Incoming as IncomingBody;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::faults::Fault;
use crate::google_error::GoogleError;
use crate::records::RequestRecord;
use crate::responses::Answer;
use crate::routes::{self, Incoming, Route};
use crate::state::Shared;
use crate::{control, dev_view, gmail, oauth};

/// Room for a 35 MB message once base64-encoded inside JSON.
const MAX_BODY_BYTES: usize = 50 * 1024 * 1024;

pub(crate) struct Running {
    stop: watch::Sender<bool>,
    accept_loop: JoinHandle<()>,
}

impl Running {
    pub fn signal_stop(&self) {
        let _ = self.stop.send(true);
    }

    pub async fn stop(self) {
        self.signal_stop();
        let _ = self.accept_loop.await;
    }
}

pub(crate) fn spawn(listener: TcpListener, shared: Arc<Shared>) -> Running {
    let (stop, stopped) = watch::channel(false);
    let accept_loop = tokio::spawn(accept(listener, shared, stopped));
    Running { stop, accept_loop }
}

async fn accept(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    let mut connections = tokio::task::JoinSet::new();
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
        let shared = shared.clone();
        let mut connection_stopped = stopped.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(answer_in_own_task(shared, request).await) }
            });
            let connection = http1::Builder::new().keep_alive(true).serve_connection(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stop_requested(&mut connection_stopped) => {
                    // Pooled keep-alive connections are closed too, so nothing reaches a
                    // stopped fake; a request in flight still gets its answer.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    drop(listener);
    while connections.join_next().await.is_some() {}
}

async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    // An error means the sender is gone, which is a stop as well.
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// A client that hangs up must not cancel an operation half-way: the request runs on its own
/// task, so a send whose answer nobody reads still happens, as it would at Google.
async fn answer_in_own_task(shared: Arc<Shared>, request: Request<IncomingBody>) -> Answer {
    match tokio::spawn(answer(shared, request)).await {
        Ok(answer) => answer,
        Err(_) => GoogleError::for_status(500, None).into_answer(),
    }
}

async fn answer(shared: Arc<Shared>, request: Request<IncomingBody>) -> Answer {
    let started = Instant::now();
    let at_ms = shared.elapsed_ms();
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let route = routes::resolve(&parts.method, &path);
    let operation = route.operation();
    let method = parts.method.to_string();

    let answer = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Err(_) => GoogleError::payload_too_large(MAX_BODY_BYTES).into_answer(),
        Ok(collected) => {
            let incoming = Incoming {
                query: parts
                    .uri
                    .query()
                    .map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect())
                    .unwrap_or_default(),
                headers: parts.headers,
                body: collected.to_bytes(),
            };
            let fault = if route.takes_faults() { shared.lock().faults.take(&operation) } else { None };
            let answer = answer_with_fault(&shared, &route, &incoming, fault.as_ref());
            if let Some(delay) = fault.as_ref().and_then(|f| f.delay_ms) {
                tokio::time::sleep(Duration::from_millis(delay)).await;
            }
            answer
        }
    };

    shared.lock().requests.push(RequestRecord {
        method,
        path,
        operation,
        status: answer.status().as_u16(),
        at_ms,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    answer
}

fn answer_with_fault(shared: &Shared, route: &Route, incoming: &Incoming, fault: Option<&Fault>) -> Answer {
    let Some((fault, status)) = fault.and_then(|f| f.status.map(|status| (f, status))) else {
        return dispatch(shared, route, incoming);
    };
    if fault.after_effect {
        let _ = dispatch(shared, route, incoming);
    }
    match route {
        Route::Token => oauth::fault_answer(status, fault.retry_after_seconds),
        _ => GoogleError::for_status(status, fault.retry_after_seconds).into_answer(),
    }
}

fn dispatch(shared: &Shared, route: &Route, incoming: &Incoming) -> Answer {
    match route {
        Route::Token => oauth::grant(shared, incoming),
        Route::Gmail { user_id, call } => gmail::handle(shared, user_id, call, incoming),
        Route::Control(call) => control::handle(shared, call, incoming),
        Route::DevView => dev_view::page(shared),
        Route::Unknown => unknown(),
    }
}

fn unknown() -> Answer {
    GoogleError::method_not_found().into_answer()
}
