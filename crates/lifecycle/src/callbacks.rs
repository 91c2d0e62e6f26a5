//! Delivering callbacks to the relay (SPEC §6): signed, retried with backoff, every attempt
//! recorded. Delivery never changes a call's state and never fails the operation that sends it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use gatehouse_domain::callback::{self, CallbackKind, CheckpointCallback, CompletionCallback, ProgressCallback};
use gatehouse_domain::{ApiError, Status};
use gatehouse_http::{Answer, Method};
use gatehouse_store::{CallbackAttempt, ToolCall};
use serde::Serialize;

use crate::Config;

/// Attempts for callbacks that report a settled fact (checkpoint, completion).
const REPORT_ATTEMPTS: u32 = 4;
/// The wait before the second attempt; it doubles each time after.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

pub(crate) async fn completion(call: &ToolCall) {
    let payload = CompletionCallback {
        tool_call_id: call.tool_call_id.clone(),
        session_id: call.session_id.clone(),
        status: call.status,
        result: call.result.clone(),
        voice_response: call.voice_response.clone(),
        execution_time_ms: call.execution_time_ms,
        trace_id: call.trace_id.clone(),
    };
    deliver(call, CallbackKind::Completion, &payload, REPORT_ATTEMPTS).await;
}

pub(crate) async fn checkpoint(call: &ToolCall, message: String) {
    let payload = CheckpointCallback::ready_to_execute(call.tool_call_id.clone(), message, call.trace_id.clone());
    deliver(call, CallbackKind::Checkpoint, &payload, REPORT_ATTEMPTS).await;
}

/// A progress report; one attempt, since the work does not wait on it. Returns the relay's
/// answer, if any, so the caller can honour a cancel.
pub(crate) async fn progress(call: &ToolCall, progress: &str, gate: &str) -> Option<Answer> {
    let payload = ProgressCallback {
        tool_call_id: call.tool_call_id.clone(),
        intent_id: call.intent_id.clone(),
        status: Status::Executing,
        progress: progress.to_owned(),
        gate: gate.to_owned(),
        cancellable: true,
        requires_confirmation: false,
        trace_id: call.trace_id.clone(),
    };
    deliver(call, CallbackKind::Progress, &payload, 1).await
}

/// Sends `payload` to the call's relay, retrying with backoff until a 2xx or `attempts` run
/// out. Returns the relay's last answer, or `None` if there is no relay or it never answered.
pub(crate) async fn deliver(
    call: &ToolCall,
    kind: CallbackKind,
    payload: &impl Serialize,
    attempts: u32,
) -> Option<Answer> {
    match try_deliver(call, kind, payload, attempts).await {
        Ok(answer) => answer,
        Err(error) => {
            gatehouse_http::log_line(
                "warn",
                &format!("{} callback for {}: {}", kind.as_str(), call.tool_call_id, error.detail.unwrap_or(error.message)),
            );
            None
        }
    }
}

async fn try_deliver(
    call: &ToolCall,
    kind: CallbackKind,
    payload: &impl Serialize,
    attempts: u32,
) -> Result<Option<Answer>, ApiError> {
    let Some(url) = call.callback_url.clone().or(Config::callback_default_url()?) else {
        return Ok(None);
    };
    let body =
        serde_json::to_vec(payload).map_err(|e| ApiError::internal().with_detail(format!("encoding a callback: {e}")))?;
    // The allowlist is checked again at send time: the configuration may have changed since
    // the URL was accepted.
    if let Err(problem) = Config::callback_allowlist()?.check(&url) {
        record(call, kind, &url, 1, None, Some(&format!("not sent: the URL {problem}")), 0.0);
        return Ok(None);
    }
    let secret = Config::callback_secret()?;
    let timeout = Config::callback_timeout()?;
    let traceparent = call.trace_id.as_deref().map(gatehouse_http::traceparent);

    let mut last = None;
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=attempts {
        let unix = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let signature = callback::sign(secret.as_bytes(), unix, &body);
        let mut headers =
            vec![("content-type", "application/json"), (callback::SIGNATURE_HEADER, signature.as_str())];
        headers.push(("x-gatehouse-callback", kind.as_str()));
        if let Some(traceparent) = &traceparent {
            headers.push(("traceparent", traceparent));
        }
        let clock = Instant::now();
        let outcome = gatehouse_http::send(Method::Post, &url, &headers, body.clone(), timeout).await;
        let elapsed = clock.elapsed().as_secs_f64() * 1000.0;
        let delivered = match &outcome {
            Ok(answer) => {
                let error = (!answer.is_success()).then(|| format!("the relay answered HTTP {}", answer.status));
                record(call, kind, &url, attempt, Some(answer.status), error.as_deref(), elapsed);
                answer.is_success()
            }
            Err(failure) => {
                record(call, kind, &url, attempt, None, Some(&failure.to_string()), elapsed);
                false
            }
        };
        last = outcome.ok();
        if delivered {
            break;
        }
        if attempt < attempts {
            gatehouse_http::sleep(backoff).await;
            backoff *= 2;
        }
    }
    Ok(last)
}

#[allow(clippy::too_many_arguments)] // one audit row, one argument per column
fn record(
    call: &ToolCall,
    kind: CallbackKind,
    url: &str,
    attempt: u32,
    status_code: Option<u16>,
    error: Option<&str>,
    duration_ms: f64,
) {
    let row = CallbackAttempt {
        tool_call_id: call.tool_call_id.as_str(),
        kind: kind.as_str(),
        url,
        attempt: i32::try_from(attempt).unwrap_or(i32::MAX),
        status_code: status_code.map(i32::from),
        error,
        duration_ms,
    };
    // A connection per row: delivery can take seconds of backoff, and holding a pooled
    // connection through it would starve the calls themselves.
    let recorded = gatehouse_http::open_db()
        .and_then(|db| gatehouse_store::record_callback_attempt(&db, &row).map_err(ApiError::from));
    if let Err(e) = recorded {
        gatehouse_http::log_line("warn", &format!("recording a callback attempt: {}", e.detail.unwrap_or(e.message)));
    }
}
