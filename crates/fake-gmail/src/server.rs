//! The HTTP/1.1 listener and the path of every request: read it, name its operation, apply an
//! armed fault, answer, record.
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_http_listener::Serving;
use http_body_util::{BodyExt, Limited};
use hyper::Request;
use hyper::body::Incoming as IncomingBody;
use tokio::net::TcpListener;

use crate::faults::Fault;
use crate::google_error::GoogleError;
use crate::records::RequestRecord;
use crate::responses::Answer;
use crate::routes::{self, Incoming, Route};
use crate::state::Shared;
use crate::{control, dev_view, gmail, oauth};

/// Room for a 35 MB message once base64-encoded inside JSON.
const MAX_BODY_BYTES: usize = 50 * 1024 * 1024;

pub(crate) fn spawn(listener: TcpListener, shared: Arc<Shared>) -> Serving {
    gatehouse_http_listener::serve(listener, move |request| answer_in_own_task(shared.clone(), request))
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
