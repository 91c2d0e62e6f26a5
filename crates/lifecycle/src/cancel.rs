//! `DELETE /voice-tools/cancel/:id`: cancel a call that has not started its side effect, and
//! say truthfully what that means.

use gatehouse_domain::contract::{Checkpoint, ToolRequest};
use gatehouse_domain::limits::{MAX_REASON_CHARS, check_optional_length};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_store::{ToolCall, Transition};
use gatehouse_tool::ToolError;
use serde::Deserialize;

use crate::flow::tool_request;
use crate::rejection::{self, Action};
use crate::{Brief, Ctx, Outcome, callbacks};

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    #[serde(default)]
    pub reason: Option<String>,
}

pub async fn cancel(ctx: &Ctx, id: &ToolCallId, request: CancelRequest) -> Result<Outcome<Brief>, ApiError> {
    cancel_as(ctx, id, request, "relay").await
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
    ctx: &Ctx,
    id: &ToolCallId,
    request: CancelRequest,
    actor: &str,
) -> Result<Outcome<Brief>, ApiError> {
    check_optional_length("reason", request.reason.as_deref(), MAX_REASON_CHARS)?;
    let db = ctx.db()?;
    // The sentence depends on the state the cancel wins from, which only the statement knows;
    // it is written from the state read first and corrected in the rare case that changed.
    let call = gatehouse_store::get_call(&db, id)?.ok_or_else(|| rejection::not_found(id))?;
    if let Some(error) = rejection::check(Action::Cancel, &call) {
        return Err(error);
    }
    let message = cancelled_message(call.status);
    match gatehouse_store::cancel_call(&db, id, request.reason.as_deref(), actor, message)? {
        Transition::Applied { before, after } => {
            let message = cancelled_message(before.status).to_owned();
            let brief = Brief { tool_call_id: id.clone(), status: Status::Cancelled, message };
            let discard = if before.status == Status::Prepared { before.checkpoint.clone() } else { None };
            Ok(Outcome::new(brief).then(after_cancel(ctx.clone(), *after, discard)))
        }
        other => Err(rejection::refuse(&db, Action::Cancel, id, other)),
    }
}

/// After a cancel: the tool discards what `prepare` left, then the relay hears the outcome.
async fn after_cancel(ctx: Ctx, call: ToolCall, checkpoint: Option<Checkpoint>) {
    ctx.release();
    if let Some(checkpoint) = checkpoint {
        discard(&ctx, &call, checkpoint).await;
    }
    callbacks::completion(&ctx, &call).await;
}

/// Asks the tool to undo its prepared work. The call's state is already final and true, and a
/// leftover draft is not a side effect, so a failure is only logged; the discard stays owed
/// and the sweeper tries it again later (`sweep`). Once the tool has answered (done, or a
/// definitive no), nothing is owed.
pub(crate) async fn discard(ctx: &Ctx, call: &ToolCall, checkpoint: Checkpoint) {
    ctx.release();
    let request = ToolRequest { checkpoint: Some(checkpoint), attempt: 1, ..tool_request(call) };
    let outcome = match ctx.config().tool(&call.function_name, &call.component) {
        Ok(tool) => tool.discard(&request).await,
        Err(e) => Err(ToolError::Crashed(e.to_string())),
    };
    if let Err(e) = &outcome {
        gatehouse_platform::log_line("warn", &format!("discarding the prepared work of {}: {e}", call.tool_call_id));
    }
    if !matches!(outcome, Err(ToolError::Crashed(_))) {
        let settled = ctx.db().and_then(|db| Ok(gatehouse_store::discard_settled(&db, &call.tool_call_id)?));
        ctx.release();
        if let Err(e) = settled {
            let problem = e.detail.unwrap_or(e.message);
            gatehouse_platform::log_line("warn", &format!("recording the discard of {}: {problem}", call.tool_call_id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sentence_says_how_far_the_call_had_come() {
        assert!(cancelled_message(Status::Prepared).contains("final check"));
        assert!(cancelled_message(Status::Executing).contains("stopped it before"));
        assert_eq!(cancelled_message(Status::Pending), cancelled_message(Status::Expired));
        for status in [Status::Pending, Status::Prepared, Status::Executing] {
            assert!(cancelled_message(status).contains("was done"), "{status}: it says nothing happened");
        }
    }
}
