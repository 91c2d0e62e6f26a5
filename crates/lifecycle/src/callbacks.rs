//! Delivering callbacks to the relay (docs/architecture.md, "Callbacks"): signed, retried with
//! backoff, every attempt recorded. Delivery never changes a call's state and never fails the
//! operation that sends it.

use std::time::{Duration, Instant};

use gatehouse_domain::callback::{self, CallbackKind, CheckpointCallback, CompletionCallback, ProgressCallback};
use gatehouse_domain::tenant_callbacks::TenantCallbacks;
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_platform::Method;
use gatehouse_platform::OutboundResponse;
use gatehouse_store::{CallbackAttempt, Connection, StoreError, ToolCall};
use serde::Serialize;

use crate::Ctx;

/// Attempts for callbacks that report a settled fact (checkpoint, completion).
const REPORT_ATTEMPTS: u32 = 4;
/// The wait before the second attempt; it doubles each time after.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

pub(crate) async fn completion(ctx: &Ctx, call: &ToolCall) {
    let payload = CompletionCallback {
        tool_call_id: call.tool_call_id.clone(),
        tenant: call.tenant.clone(),
        session_id: call.session_id.clone(),
        status: call.status,
        result: call.result.clone(),
        voice_response: call.voice_response.clone(),
        execution_time_ms: call.execution_time_ms,
        context_available: context_key(call).is_some(),
        context_key: context_key(call),
        trace_id: call.trace_id.clone(),
    };
    deliver(ctx, call, CallbackKind::Completion, &payload, REPORT_ATTEMPTS, Patience::Callback).await;
    tried(ctx, call, CallbackKind::Completion);
}

/// A completed call whose result names a session-context key has stored context the agent can
/// fetch with `GET /get-session-context`.
fn context_key(call: &ToolCall) -> Option<String> {
    let result = call.result.as_ref().filter(|_| call.status == Status::Completed)?;
    result.get("context_key").and_then(serde_json::Value::as_str).map(str::to_owned)
}

pub(crate) async fn checkpoint(ctx: &Ctx, call: &ToolCall, message: String) {
    let payload = CheckpointCallback::ready_to_execute(
        call.tool_call_id.clone(),
        call.tenant.clone(),
        message,
        call.trace_id.clone(),
    );
    deliver(ctx, call, CallbackKind::Checkpoint, &payload, REPORT_ATTEMPTS, Patience::Callback).await;
    tried(ctx, call, CallbackKind::Checkpoint);
}

/// A report (checkpoint or completion) has been tried, delivered or not: the call no longer
/// owes it, so the sweeper will not send it again (see `sweep::deliver_owed`). If this write is
/// lost, the sweeper sends the report once more; a relay takes a repeated report as the same.
fn tried(ctx: &Ctx, call: &ToolCall, kind: CallbackKind) {
    tried_together(ctx, std::slice::from_ref(&call.tool_call_id), kind);
}

/// [`tried`] for any number of calls, in one statement: the sweeper's calls whose reports have
/// no relay to go to ([`destination`] is `None`), a whole batch at once.
pub(crate) fn tried_together(ctx: &Ctx, ids: &[ToolCallId], kind: CallbackKind) {
    let Some(first) = ids.first() else { return };
    let what = match ids.len() {
        1 => format!("{} report for {first}", kind.as_str()),
        n => format!("{} reports for {first} and {} other calls", kind.as_str(), n - 1),
    };
    bookkeep(ctx, &what, |db| gatehouse_store::reports_tried(db, ids, kind.as_str()));
}

/// Where a call's reports go: its own callback URL, else the deployment's default; `None` when
/// neither is set, and nobody is told.
pub(crate) fn destination(ctx: &Ctx, call: &ToolCall) -> Result<Option<String>, ApiError> {
    Ok(call.callback_url.clone().or(ctx.config().callback_default_url(&call.tenant)?))
}

/// One bookkeeping write of a delivery, on a connection given back at once (the connection
/// rule: delivery can take seconds of backoff). A failed write is logged as `what`; it never
/// fails the delivery.
fn bookkeep(ctx: &Ctx, what: &str, write: impl FnOnce(&Connection) -> Result<(), StoreError>) {
    let written = ctx.db().and_then(|db| Ok(write(&db)?));
    ctx.release();
    if let Err(error) = written {
        gatehouse_platform::log_line("warn", &format!("{what}: {}", error.detail.unwrap_or(error.message)));
    }
}

/// A progress report; one attempt, since the work does not wait on it. Returns the relay's
/// answer, if any, so the caller can honour a cancel.
pub(crate) async fn progress(ctx: &Ctx, call: &ToolCall, progress: &str, gate: &str) -> Option<OutboundResponse> {
    let payload = progress_payload(call, progress, gate, false);
    deliver(ctx, call, CallbackKind::Progress, &payload, 1, Patience::Callback).await
}

/// A direct flow's gate: one attempt, waiting up to the gate timeout, because at a gate that
/// asks for confirmation the relay answers only once the caller has spoken.
pub(crate) async fn gate(
    ctx: &Ctx,
    call: &ToolCall,
    gate: &str,
    progress: &str,
    requires_confirmation: bool,
) -> Option<OutboundResponse> {
    let payload = progress_payload(call, progress, gate, requires_confirmation);
    deliver(ctx, call, CallbackKind::Progress, &payload, 1, Patience::Gate).await
}

fn progress_payload(call: &ToolCall, progress: &str, gate: &str, requires_confirmation: bool) -> ProgressCallback {
    ProgressCallback {
        tool_call_id: call.tool_call_id.clone(),
        tenant: call.tenant.clone(),
        intent_id: call.intent_id.clone(),
        status: call.status,
        progress: progress.to_owned(),
        gate: gate.to_owned(),
        cancellable: call.side_effect_started_at.is_none(),
        requires_confirmation,
        trace_id: call.trace_id.clone(),
    }
}

/// How long one attempt waits for the relay.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Patience {
    Callback,
    Gate,
}

impl Patience {
    fn timeout(self, ctx: &Ctx) -> Result<Duration, ApiError> {
        match self {
            Patience::Callback => ctx.config().callback_timeout(),
            Patience::Gate => ctx.config().gate_timeout(),
        }
    }
}

/// Sends `payload` to the call's relay, retrying with backoff until a 2xx or `attempts` run
/// out. Returns the relay's last answer, or `None` if there is no relay or it never answered.
pub(crate) async fn deliver(
    ctx: &Ctx,
    call: &ToolCall,
    kind: CallbackKind,
    payload: &impl Serialize,
    attempts: u32,
    patience: Patience,
) -> Option<OutboundResponse> {
    match try_deliver(ctx, call, kind, payload, attempts, patience).await {
        Ok(answer) => answer,
        Err(error) => {
            gatehouse_platform::log_line(
                "warn",
                &format!(
                    "{} callback for {}: {}",
                    kind.as_str(),
                    call.tool_call_id,
                    error.detail.unwrap_or(error.message)
                ),
            );
            None
        }
    }
}

async fn try_deliver(
    ctx: &Ctx,
    call: &ToolCall,
    kind: CallbackKind,
    payload: &impl Serialize,
    attempts: u32,
    patience: Patience,
) -> Result<Option<OutboundResponse>, ApiError> {
    let Some(url) = destination(ctx, call)? else {
        return Ok(None);
    };
    let body = serde_json::to_vec(payload)
        .map_err(|e| ApiError::internal().with_detail(format!("encoding a callback: {e}")))?;
    // The tenant's hosts are checked again at send time: they may have changed since the URL
    // was accepted. Its own secret signs: no tenant's relay trusts another tenant's callbacks.
    let settings = tenant_callbacks(ctx, &call.tenant)?;
    if let Err(problem) = ctx.config().callback_allowlist(&call.tenant, &settings)?.check(&url) {
        record(ctx, call, kind, &url, 1, None, Some(&format!("not sent: the URL {problem}")), 0.0);
        return Ok(None);
    }
    let secrets = settings.secrets(&call.tenant, &ctx.config().callback_secrets()?);
    let secrets: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
    let timeout = patience.timeout(ctx)?;
    let traceparent = call.trace_id.as_deref().map(gatehouse_platform::traceparent);

    let mut last = None;
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=attempts {
        // Each try signed afresh, with a nonce of its own: the relay spends each once.
        let nonce = gatehouse_platform::new_token();
        let signature = callback::sign_with_each(&secrets, &url, gatehouse_platform::unix_now(), &nonce, &body);
        let mut headers = vec![("content-type", "application/json"), (callback::SIGNATURE_HEADER, signature.as_str())];
        headers.push(("x-gatehouse-callback", kind.as_str()));
        headers.push((callback::TENANT_HEADER, call.tenant.as_str()));
        if let Some(traceparent) = &traceparent {
            headers.push(("traceparent", traceparent));
        }
        let clock = Instant::now();
        let outcome = gatehouse_platform::send(Method::Post, &url, &headers, body.clone(), timeout).await;
        let elapsed = clock.elapsed().as_secs_f64() * 1000.0;
        let delivered = match &outcome {
            Ok(answer) => {
                let error = (!answer.is_success()).then(|| format!("the relay answered HTTP {}", answer.status));
                record(ctx, call, kind, &url, attempt, Some(answer.status), error.as_deref(), elapsed);
                answer.is_success()
            }
            Err(failure) => {
                record(ctx, call, kind, &url, attempt, None, Some(&unanswered(failure)), elapsed);
                false
            }
        };
        // A refused origin stays refused until the operator changes the manifest.
        let denied = matches!(outcome, Err(gatehouse_platform::SendFailure::Denied));
        last = outcome.ok();
        if delivered || denied {
            break;
        }
        if attempt < attempts {
            gatehouse_platform::sleep(backoff).await;
            backoff *= 2;
        }
    }
    Ok(last)
}

/// What the tenants row says of `tenant`'s callbacks, on a connection given back at once. The
/// first tenant's need no read (its hosts and secret are the deployment's) unless its secret was
/// rotated, which only the row tells: so it is read for every tenant, once per delivery.
fn tenant_callbacks(ctx: &Ctx, tenant: &str) -> Result<TenantCallbacks, ApiError> {
    let read = ctx.db().and_then(|db| Ok(gatehouse_store::tenant_callbacks(&db, tenant)?));
    ctx.release();
    // A tenant with no row (its row was deleted) has named no hosts: nothing is sent.
    Ok(read?.unwrap_or_default())
}

/// Why a relay gave no answer, as the audit row keeps it (`GET /voice-tools/calls/:id/callbacks`
/// shows it to anyone with a token): that it was unreachable, not how, so the route cannot
/// tell a closed port from a filtered one; the log has the transport's own words.
fn unanswered(failure: &gatehouse_platform::SendFailure) -> String {
    use gatehouse_platform::SendFailure;
    match failure {
        SendFailure::TimedOut(timeout) => format!("no answer within {} s", timeout.as_secs_f64()),
        SendFailure::TooLarge(cap) => format!("the answer was longer than {cap} bytes"),
        // The operator's own configuration, not the relay: callback_allowed_hosts admits the
        // URL but callback_host (the manifest's outbound rule) does not cover it.
        SendFailure::Denied => {
            gatehouse_platform::log_line(
                "warn",
                "a callback URL admitted by callback_allowed_hosts is refused by the manifest's \
                 allowed_outbound_hosts: set callback_host to cover it",
            );
            "not allowed by the manifest's allowed_outbound_hosts (callback_host)".to_owned()
        }
        SendFailure::Transport(detail) | SendFailure::NotConnected(detail) => {
            gatehouse_platform::log_line("warn", &format!("callback transport failure: {detail}"));
            "unreachable".to_owned()
        }
    }
}

#[allow(clippy::too_many_arguments)] // one audit row, one argument per column
fn record(
    ctx: &Ctx,
    call: &ToolCall,
    kind: CallbackKind,
    url: &str,
    attempt: u32,
    status_code: Option<u16>,
    error: Option<&str>,
    duration_ms: f64,
) {
    let row = CallbackAttempt {
        tenant: &call.tenant,
        tool_call_id: call.tool_call_id.as_str(),
        kind: kind.as_str(),
        url,
        attempt: i32::try_from(attempt).unwrap_or(i32::MAX),
        status_code: status_code.map(i32::from),
        error,
        duration_ms,
    };
    bookkeep(ctx, "recording a callback attempt", |db| gatehouse_store::record_callback_attempt(db, &row));
}
