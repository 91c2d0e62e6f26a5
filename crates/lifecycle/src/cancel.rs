//! `DELETE /voice-tools/cancel/:id`: cancel a call that has not started its side effect, and
//! say truthfully what that means.

use gatehouse_domain::contract::Checkpoint;
use gatehouse_domain::limits::{MAX_REASON_CHARS, check_optional_length};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_store::{Caller, ToolCall, Transition};
use serde::Deserialize;

use crate::rejection::{self, Action};
use crate::tool_ops::{cancelled_message, discard};
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

pub(crate) async fn cancel_as(
    ctx: &Ctx,
    id: &ToolCallId,
    request: CancelRequest,
    actor: &str,
) -> Result<Outcome<Brief>, ApiError> {
    check_optional_length("reason", request.reason.as_deref(), MAX_REASON_CHARS)?;
    let caller = Caller::Key(ctx.grant()?);
    let db = ctx.db()?;
    // The sentence depends on the state the cancel wins from, which only the statement knows;
    // it is written from the state read first and corrected in the rare case that changed.
    let call = gatehouse_store::get_call(&db, caller, id)?.ok_or_else(|| rejection::not_found(id))?;
    if let Some(error) = rejection::check(Action::Cancel, &call) {
        return Err(error);
    }
    let message = cancelled_message(call.status);
    match gatehouse_store::cancel_call(&db, caller, id, request.reason.as_deref(), actor, message)? {
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
