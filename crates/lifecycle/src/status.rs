//! `GET /voice-tools/status/:id` (with an optional long-poll) and `GET /get-session-context`.

use std::time::{Duration, Instant};

use gatehouse_domain::{ApiError, SessionId, Status, ToolCallId};
use gatehouse_http::Reply;
use gatehouse_store::Connection;
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
        let call = gatehouse_store::get_call(&gatehouse_http::open_db()?, id)?.ok_or_else(|| rejection::not_found(id))?;
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

/// A stored session context value; an expired one is absent.
pub fn session_context(db: &Connection, session_id: &SessionId, key: &str) -> Result<Reply, ApiError> {
    match gatehouse_store::session_context_get(db, session_id.as_str(), key)? {
        Some(context) => Ok(gatehouse_http::json_response(200, &json!({"context": context})).into()),
        None => Err(ApiError::not_found("Not found or expired")),
    }
}
