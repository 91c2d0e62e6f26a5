//! `POST /voice-tools/confirm/:id` and `POST /resume-execution/:id`: start (or continue) a
//! call's execution, answer at once, and hand the call to the executor. Under
//! `Prefer: wait=N` the answer is the state the call reaches within N seconds instead.

use std::time::Duration;

use gatehouse_domain::limits::{MAX_REASON_CHARS, MAX_URL_CHARS, check_optional_length};
use gatehouse_domain::{ApiError, ErrorCode, Status, ToolCallId};
use gatehouse_platform::Method;
use gatehouse_store::{Caller, ToolCall, Transition};
use serde::Deserialize;

use crate::cancel::{CancelRequest, cancel_as};
use crate::drive::DriveRequest;
use crate::rejection::{self, Action};
use crate::{Brief, Ctx, Driven, Outcome, Progress};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    #[serde(default)]
    pub callback_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    pub action: String,
    #[serde(default)]
    pub reason: Option<String>,
}

pub async fn confirm(
    ctx: &Ctx,
    id: &ToolCallId,
    request: ConfirmRequest,
    wait: Option<Duration>,
) -> Result<Outcome<Progress>, ApiError> {
    check_optional_length("callback_url", request.callback_url.as_deref(), MAX_URL_CHARS)?;
    let callback_url = ctx.config().checked_callback_url(ctx.grant()?, request.callback_url.as_deref())?;
    let lease_owner = gatehouse_platform::new_token();
    let lease_seconds = ctx.config().lease_seconds()?;
    let caller = Caller::Key(ctx.grant()?);
    let db = ctx.db()?;
    match gatehouse_store::confirm_call(&db, caller, id, &lease_owner, lease_seconds, callback_url.as_deref())? {
        Transition::Applied { after, .. } => {
            drop(db);
            let drive = DriveRequest { tool_call_id: id.clone(), lease_owner };
            let message = "Okay, I'm on it. I'll check with you before anything is final.";
            start(ctx, drive, after.trace_id, lease_seconds, wait, message).await
        }
        Transition::Rejected { current }
            if current.status == Status::Pending
                && callback_url
                    .as_deref()
                    .is_some_and(|url| current.callback_url.as_deref().is_some_and(|own| own != url)) =>
        {
            Err(ApiError::new(
                ErrorCode::CallbackUrlConflict,
                "This call already reports to another callback URL; a confirm cannot change where its reports go.",
            )
            .with_tool_call_id(id.clone())
            .with_call_status(current.status))
        }
        other => Err(rejection::refuse(&db, Action::Confirm, id, other)),
    }
}

pub async fn resume(
    ctx: &Ctx,
    id: &ToolCallId,
    request: ResumeRequest,
    wait: Option<Duration>,
) -> Result<Outcome<Progress>, ApiError> {
    check_optional_length("reason", request.reason.as_deref(), MAX_REASON_CHARS)?;
    match request.action.as_str() {
        "proceed" => {}
        "cancel" => {
            let cancelled = cancel_as(ctx, id, CancelRequest { reason: request.reason }, "resume").await?;
            return Ok(cancelled.map(Progress::Cancelled));
        }
        _ => {
            return Err(ApiError::invalid_input("The action must be \"proceed\" or \"cancel\".")
                .with_field("action", "must be proceed or cancel"));
        }
    }
    let lease_owner = gatehouse_platform::new_token();
    let lease_seconds = ctx.config().lease_seconds()?;
    let caller = Caller::Key(ctx.grant()?);
    let db = ctx.db()?;
    match gatehouse_store::resume_call(&db, caller, id, &lease_owner, lease_seconds)? {
        Transition::Applied { after, .. } => {
            drop(db);
            let drive = DriveRequest { tool_call_id: id.clone(), lease_owner };
            start(ctx, drive, after.trace_id, lease_seconds, wait, "Going ahead now.").await
        }
        other => Err(rejection::refuse(&db, Action::Resume, id, other)),
    }
}

/// Hands an EXECUTING call (whose lease the drive request holds) to the executor, in the call's
/// trace. Under `Prefer: wait` the hand-off is awaited for up to the wait, holding no
/// connection meanwhile, since the executor and the tool need connections of their own.
async fn start(
    ctx: &Ctx,
    drive: DriveRequest,
    trace_id: Option<String>,
    lease_seconds: f64,
    wait: Option<Duration>,
    message: &str,
) -> Result<Outcome<Progress>, ApiError> {
    let id = &drive.tool_call_id.clone();
    let running =
        Progress::Running(Brief { tool_call_id: id.clone(), status: Status::Executing, message: message.to_owned() });
    let work = hand_to_executor(ctx.clone(), drive, trace_id, lease_seconds);
    let Some(wait) = wait else {
        return Ok(Outcome::new(running).then(work));
    };
    ctx.release();
    let mut work = Box::pin(work);
    let driven = gatehouse_platform::within(wait, work.as_mut()).await;
    let finished = driven.is_some();
    // The executor answers with the call as its walk left it. A call it left EXECUTING (a
    // crashed tool whose lease it gave back, say) may have moved on since: that one is read.
    // The transition has committed and the executor has the call: whatever reading it gives,
    // the answer must not say that nothing happened. If it cannot be read (the database went
    // away meanwhile), the truthful answer is the 202 the transition earned, and the hand-off
    // goes on.
    let reread = match driven.flatten().filter(|call| call.status != Status::Executing) {
        Some(call) => Ok(Some(*call)),
        None => ctx.db().and_then(|db| Ok(gatehouse_store::get_call(&db, ctx.caller(), id)?)),
    };
    let answer = match reread {
        Ok(Some(call)) if call.status != Status::Executing => Progress::Reached(Box::new(call)),
        Ok(_) => running,
        Err(error) => {
            gatehouse_platform::log_error(&error);
            running
        }
    };
    let outcome = Outcome::new(answer).waited(Some(wait));
    Ok(if finished { outcome } else { outcome.then(work) })
}

/// Asks the executor to drive the call, and waits for it so the work outlives this request
/// even if the caller hung up. The executor answers once the call has settled or paused, with
/// the call as it left it (`None` when it did not say, or could not be reached). It works in
/// the call's trace, so a re-drive by the sweeper is found under the same trace.
pub(crate) async fn hand_to_executor(
    ctx: Ctx,
    request: DriveRequest,
    trace_id: Option<String>,
    lease_seconds: f64,
) -> Option<Box<ToolCall>> {
    ctx.release();
    let url = match ctx.config().executor_drive_url() {
        Ok(url) => url,
        Err(e) => {
            gatehouse_platform::log_error(&e);
            return None;
        }
    };
    let body = match serde_json::to_vec(&request) {
        Ok(body) => body,
        Err(e) => {
            gatehouse_platform::log_line("error", &format!("encoding a drive request: {e}"));
            return None;
        }
    };
    let signature = match gatehouse_platform::service_signature(&Method::Post, &url, &body) {
        Ok(signature) => signature,
        Err(e) => {
            gatehouse_platform::log_error(&e);
            return None;
        }
    };
    let timeout = Duration::from_secs_f64(lease_seconds.max(1.0));
    let traceparent = gatehouse_platform::traceparent(&trace_id.unwrap_or_else(gatehouse_platform::trace_id));
    let mut headers = vec![("content-type", "application/json"), ("traceparent", traceparent.as_str())];
    if let Some((name, value)) = &signature {
        headers.push((name, value));
    }
    let outcome = gatehouse_platform::send(Method::Post, &url, &headers, body, timeout).await;
    match outcome {
        Ok(answer) if answer.is_success() => serde_json::from_slice::<Driven>(&answer.body).ok().and_then(|d| d.call),
        // The lease runs out and the sweeper takes the call up again: nothing is lost.
        Ok(answer) => {
            let problem = format!("the executor answered HTTP {} for {}", answer.status, request.tool_call_id);
            gatehouse_platform::log_line("warn", &problem);
            None
        }
        Err(e) => {
            gatehouse_platform::log_line("warn", &format!("handing {} to the executor: {e}", request.tool_call_id));
            None
        }
    }
}
