//! The reads: `GET /voice-tools/status/:id` (with an optional long-poll),
//! `GET /voice-tools/context/:session` and `GET /get-session-context`.

use std::time::{Duration, Instant};

use gatehouse_domain::{ApiError, SessionId, Status, ToolCallId};
use gatehouse_store::{Caller, ToolCall};

use crate::{Ctx, Outcome, SessionCalls, SessionContext, rejection};

/// How often a long-poll looks at the call again.
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// One call in full. Under `Prefer: wait=N` it answers as soon as the call is no longer
/// EXECUTING, or after N seconds with whatever state it is in. A long-poll takes a connection
/// only for each look (the connection rule), so waiting callers do not hold the pool.
pub async fn status(ctx: &Ctx, id: &ToolCallId, wait: Option<Duration>) -> Result<Outcome<ToolCall>, ApiError> {
    let deadline = wait.map(|wait| Instant::now() + wait);
    loop {
        let call = gatehouse_store::get_call(&*ctx.db()?, Caller::Key(ctx.grant()?), id)?
            .ok_or_else(|| rejection::not_found(id))?;
        let waiting = call.status == Status::Executing && deadline.is_some_and(|d| Instant::now() < d);
        if !waiting {
            return Ok(Outcome::new(call).waited(wait));
        }
        ctx.release();
        gatehouse_platform::sleep(POLL_INTERVAL).await;
    }
}

/// A session id from the client, or the one error every route gives for a bad one.
pub fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(raw)
        .map_err(|e| ApiError::invalid_input("The session id is not valid.").with_field("session_id", e.to_string()))
}

/// What the agent needs to know about a session: its open calls and its last settled ones.
pub fn context(ctx: &Ctx, session_id: &str) -> Result<SessionCalls, ApiError> {
    let session_id = self::session_id(session_id)?;
    let session = ctx.session(&session_id)?;
    let view = gatehouse_store::session_context_view(&*ctx.db()?, session)?;
    Ok(SessionCalls { session_id, view })
}

/// A stored session context value; an expired one is absent.
pub fn session_context(ctx: &Ctx, session_id: &str, key: &str) -> Result<SessionContext, ApiError> {
    if key.is_empty() {
        return Err(ApiError::invalid_input("Say which context to read.").with_field("context_key", "is required"));
    }
    let session_id = self::session_id(session_id)?;
    let session = ctx.session(&session_id)?;
    match gatehouse_store::session_context_get(&*ctx.db()?, session, key)? {
        Some(context) => Ok(SessionContext { context }),
        None => Err(ApiError::not_found("Not found or expired")),
    }
}
