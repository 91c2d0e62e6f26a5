//! The reads behind the dashboard: every call, newest first, a page at a time
//! (`GET /voice-tools/calls`), and the callback attempts of one call
//! (`GET /voice-tools/calls/:id/callbacks`); and the relay's own mark on a call, that the caller
//! was told its outcome (`POST /voice-tools/calls/:id/outcome-told`).

use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_store::{CallCursor, CallFilter};

use crate::tools::{invalid, one_of, page_limit};
use crate::{CallbackAttempts, CallsPage, Ctx, OutcomeTold, rejection};

/// How many calls a page holds unless the client says otherwise, and at most.
const DEFAULT_PAGE: u32 = 25;
const MAX_PAGE: u32 = 100;
/// The longest function name worth looking for: no registered tool has a longer one.
const MAX_FUNCTION_NAME: usize = 200;

/// What `GET /voice-tools/calls` may be asked, as the query string gave it.
#[derive(Debug, Clone, Default)]
pub struct CallsQuery {
    pub session_id: Option<String>,
    pub function_name: Option<String>,
    pub status: Option<String>,
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// One page of calls, newest first, filtered by session, function and status.
pub fn list_calls(ctx: &Ctx, query: &CallsQuery) -> Result<CallsPage, ApiError> {
    let limit = page_limit(query.limit.as_deref(), DEFAULT_PAGE, MAX_PAGE)?;
    let session = query.session_id.as_deref().map(crate::session_id).transpose()?;
    let function_name = query.function_name.as_deref();
    if let Some(name) = function_name.filter(|n| n.is_empty() || n.len() > MAX_FUNCTION_NAME) {
        let problem = if name.is_empty() { "must not be empty" } else { "is longer than any tool's name" };
        return Err(invalid("function_name", problem));
    }
    let status =
        query.status.as_deref().map(|text| one_of("status", text, &Status::ALL, Status::as_str)).transpose()?;
    let after = match query.cursor.as_deref() {
        None => None,
        Some(text) => {
            Some(CallCursor::parse(text).ok_or_else(|| invalid("cursor", "is not a cursor this route gave out"))?)
        }
    };
    let filter = CallFilter {
        tenant: &ctx.grant()?.tenant,
        session_id: session.as_ref().map(|s| s.as_str()),
        function_name,
        status: status.map(Status::as_str),
        after,
        limit,
    };
    Ok(gatehouse_store::list_calls(&*ctx.db()?, &filter)?)
}

/// Every attempt to deliver the call's callbacks, oldest first, with the relay's answer (its
/// status code, or why nothing came back).
pub fn callback_attempts(ctx: &Ctx, id: &ToolCallId) -> Result<CallbackAttempts, ApiError> {
    gatehouse_store::callback_attempts(&*ctx.db()?, &ctx.grant()?.tenant, id)?.ok_or_else(|| rejection::not_found(id))
}

/// Marks that the caller was told the outcome of the settled call `id`, once (`OutcomeTold::first`
/// says whether the mark is this request's: made now, or earlier under the same `key`, the
/// request's Idempotency-Key). A call still open has no outcome to tell: 409 `invalid_state`,
/// with its status.
pub fn mark_outcome_told(ctx: &Ctx, id: &ToolCallId, key: Option<&str>) -> Result<OutcomeTold, ApiError> {
    let key = crate::create::checked_idempotency_key(key)?;
    let told: OutcomeTold = gatehouse_store::mark_outcome_told(&*ctx.db()?, &ctx.grant()?.tenant, id, key)?
        .ok_or_else(|| rejection::not_found(id))?;
    if !told.status.is_settled() {
        let message = "That hasn't finished yet, so there is no outcome to tell.";
        return Err(ApiError::invalid_state(message, told.tool_call_id, told.status));
    }
    Ok(told)
}
