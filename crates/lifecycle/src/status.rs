//! The reads: `GET /voice-tools/status/:id` (with an optional long-poll),
//! `GET /voice-tools/context/:session` and `GET /get-session-context`.

use std::time::{Duration, Instant};

use gatehouse_domain::{ApiError, SessionId, Status, ToolCallId};
use gatehouse_http::Reply;
use gatehouse_store::ContextView;
use serde::Serialize;
use serde_json::json;

use crate::rejection;

/// How often a long-poll looks at the call again.
const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// One call in full. Under `Prefer: wait=N` it answers as soon as the call is no longer
/// EXECUTING, or after N seconds with whatever state it is in. A long-poll takes a connection
/// only for each look, so waiting callers do not hold the pool.
pub async fn status(id: &ToolCallId, wait: Option<Duration>) -> Result<Reply, ApiError> {
    let deadline = wait.map(|wait| Instant::now() + wait);
    loop {
        let call =
            gatehouse_store::get_call(&gatehouse_http::open_db()?, id)?.ok_or_else(|| rejection::not_found(id))?;
        let waiting = call.status == Status::Executing && deadline.is_some_and(|d| Instant::now() < d);
        if !waiting {
            let mut response = gatehouse_http::json_response(200, &call);
            if let Some(wait) = wait {
                response.set_header("preference-applied", gatehouse_domain::preference_applied(wait));
            }
            return Ok(response.into());
        }
        gatehouse_http::sleep(POLL_INTERVAL).await;
    }
}

/// A session id from the client, or the one error every route gives for a bad one.
pub fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(raw)
        .map_err(|e| ApiError::invalid_input("The session id is not valid.").with_field("session_id", e.to_string()))
}

#[derive(Serialize)]
struct ContextResponse<'a> {
    session_id: &'a SessionId,
    #[serde(flatten)]
    view: ContextView,
}

/// What the agent needs to know about a session: its open calls and its last settled ones.
pub fn context(session_id: &str) -> Result<Reply, ApiError> {
    let session_id = &self::session_id(session_id)?;
    let view = gatehouse_store::session_context_view(&gatehouse_http::open_db()?, session_id)?;
    Ok(gatehouse_http::json_response(200, &ContextResponse { session_id, view }).into())
}

/// A stored session context value; an expired one is absent.
pub fn session_context(session_id: &str, key: &str) -> Result<Reply, ApiError> {
    if key.is_empty() {
        return Err(ApiError::invalid_input("Say which context to read.").with_field("context_key", "is required"));
    }
    let session_id = self::session_id(session_id)?;
    match gatehouse_store::session_context_get(&gatehouse_http::open_db()?, session_id.as_str(), key)? {
        Some(context) => Ok(gatehouse_http::json_response(200, &json!({"context": context})).into()),
        None => Err(ApiError::not_found("Not found or expired")),
    }
}
