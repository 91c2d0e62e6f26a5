use gatehouse_domain::{SessionOf, Status, ToolCallId, context};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;

/// What the agent needs to know about a session's tool calls: the answer of the context route,
/// `GET /voice-tools/context/:session`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextView {
    /// The newest open calls (PENDING, EXECUTING, PREPARED) that have not expired, newest
    /// first, at most [`context::PENDING_LIMIT`].
    pub pending: Vec<PendingCall>,
    /// How many open calls the session has, counted up to [`context::COUNT_CAP`].
    pub pending_total: i64,
    /// The newest settled calls (COMPLETED, FAILED, CANCELLED, EXPIRED), newest first, at
    /// most [`context::RECENT_LIMIT`].
    pub recent: Vec<CallSummary>,
    /// How many settled calls the session has, counted up to [`context::COUNT_CAP`].
    pub recent_total: i64,
}

/// One call as the agent sees it. Timestamps are RFC 3339 UTC text, formatted by the
/// database (`rfc3339_utc`), so every route prints them the same way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSummary {
    pub tool_call_id: ToolCallId,
    pub function_name: String,
    pub parameters: Value,
    pub result: Option<Value>,
    /// The effective status: a waiting call past its deadline reads as EXPIRED.
    pub status: Status,
    pub voice_response: Option<String>,
    pub created_at: String,
}

/// An open call, which also says until when it can be acted on (null while EXECUTING).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    #[serde(flatten)]
    pub call: CallSummary,
    pub expires_at: Option<String>,
}

const SESSION_CONTEXT_VIEW_SQL: &str = include_str!("sql/session_context_view.sql");

/// Reads a session's pending and recent calls in one statement.
pub fn session_context_view(db: &Connection, session: SessionOf<'_>) -> Result<ContextView, StoreError> {
    let params = [
        ParameterValue::Str(session.session_id.as_str().to_owned()),
        ParameterValue::Int64(context::PENDING_LIMIT),
        ParameterValue::Int64(context::RECENT_LIMIT),
        ParameterValue::Int64(context::COUNT_CAP),
        ParameterValue::Str(session.tenant.to_owned()),
    ];
    crate::rows::optional(db, SESSION_CONTEXT_VIEW_SQL, &params)?
        .ok_or_else(|| StoreError::Unexpected("the context query returned no row".to_owned()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The JSON the SQL builds must decode, and re-encode to the same shape.
    #[test]
    fn round_trips_the_shape_the_query_builds() {
        let from_db = json!({
            "pending": [{
                "tool_call_id": "tc_00000000000a", "function_name": "send_email",
                "parameters": {"to": "a@x.com"}, "result": null, "status": "PENDING",
                "voice_response": null, "created_at": "2026-01-01T10:00:00.000Z",
                "expires_at": "2026-01-01T10:10:00.000Z"
            }, {
                "tool_call_id": "tc_00000000000f", "function_name": "query_vector_db",
                "parameters": {}, "result": null, "status": "EXECUTING",
                "voice_response": null, "created_at": "2026-01-01T09:00:00.000Z",
                "expires_at": null
            }],
            "pending_total": 2,
            "recent": [{
                "tool_call_id": "tc_00000000000c", "function_name": "send_email",
                "parameters": {"to": "b@x.com"}, "result": {"ok": true}, "status": "EXPIRED",
                "voice_response": "Done.", "created_at": "2026-01-01T08:00:00.000Z"
            }],
            "recent_total": 100
        });
        let view: Result<ContextView, _> = serde_json::from_value(from_db.clone());
        let view = view.map_err(|e| e.to_string());
        assert_eq!(view.as_ref().map(|v| v.recent[0].status), Ok(Status::Expired));
        assert_eq!(view.map(|v| serde_json::to_value(v).ok()), Ok(Some(from_db)));
    }
}
