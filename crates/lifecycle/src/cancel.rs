//! `DELETE /voice-tools/cancel/:id`: cancel a call that has not started its side effect, and
//! say truthfully what that means.

use gatehouse_domain::contract::{Checkpoint, ToolRequest};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_http::Reply;
use gatehouse_store::{Connection, ToolCall, Transition};
use serde::Deserialize;
use serde_json::json;

use crate::drive::tool_request;
use crate::rejection::{self, Action};
use crate::{Config, callbacks};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default)]
    pub reason: Option<String>,
}

pub async fn cancel(db: &Connection, id: &ToolCallId, request: CancelRequest) -> Result<Reply, ApiError> {
    cancel_as(db, id, request, "relay").await
}

/// The sentence for a call cancelled from `status`.
pub(crate) fn cancelled_message(status: Status) -> &'static str {
    match status {
        Status::Prepared => "Okay, I've cancelled it at the final check. Nothing was done.",
        Status::Executing => "Okay, I've stopped it before anything was done.",
        _ => "Okay, I've cancelled that. Nothing was done.",
    }
}

pub(crate) async fn cancel_as(
    db: &Connection,
    id: &ToolCallId,
    request: CancelRequest,
    actor: &str,
) -> Result<Reply, ApiError> {
    // The sentence depends on the state the cancel wins from, which only the statement knows;
    // it is written from the state read first and corrected in the rare case that changed.
    let call = gatehouse_store::get_call(db, id)?.ok_or_else(|| rejection::not_found(id))?;
    if let Some(error) = rejection::check(Action::Cancel, &call) {
        return Err(error);
    }
    let message = cancelled_message(call.status);
    match gatehouse_store::cancel_call(db, id, request.reason.as_deref(), actor, message)? {
        Transition::Applied { before, after } => {
            let message = cancelled_message(before.status);
            let body = json!({"tool_call_id": id, "status": Status::Cancelled, "message": message});
            let after = *after;
            let discard = if before.status == Status::Prepared { before.checkpoint.clone() } else { None };
            Ok(Reply::from(gatehouse_http::json_response(200, &body)).then(after_cancel(after, discard)))
        }
        other => Err(rejection::refuse(db, Action::Cancel, id, other)),
    }
}

/// After a cancel: the tool discards what `prepare` left, then the relay hears the outcome.
pub(crate) async fn after_cancel(call: ToolCall, checkpoint: Option<Checkpoint>) {
    if let Some(checkpoint) = checkpoint {
        discard(&call, checkpoint).await;
    }
    callbacks::completion(&call).await;
}

/// Asks the tool to undo its prepared work. A failure is logged: the call's state is already
/// final and true, and a leftover draft is not a side effect.
pub(crate) async fn discard(call: &ToolCall, checkpoint: Checkpoint) {
    let request = ToolRequest { checkpoint: Some(checkpoint), attempt: 1, ..tool_request(call) };
    let outcome = match Config::tool(&call.function_name, &call.tool) {
        Ok(tool) => tool.discard(&request).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = outcome {
        gatehouse_http::log_line("warn", &format!("discarding the prepared work of {}: {e}", call.tool_call_id));
    }
}
