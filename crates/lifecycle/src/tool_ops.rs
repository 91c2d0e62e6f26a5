//! What the lifecycle asks of a call's tool, shared by every path that moves a call (the walk,
//! a cancel, a correction, the sweeper): the contract request for an operation on the call,
//! the discard of what `prepare` left, and the sentence a cancel answers for how far the call
//! had come. It uses no other operation's module, so all of them can use it.

use gatehouse_domain::Status;
use gatehouse_domain::contract::{Checkpoint, FaultKind, ToolFault, ToolRequest};
use gatehouse_store::ToolCall;
use gatehouse_tool::ToolError;

use crate::Ctx;

/// The contract request for an operation on `call`: its parameters, its attempt number, no
/// checkpoint and no side effect yet. Callers override what differs.
pub(crate) fn tool_request(call: &ToolCall) -> ToolRequest {
    ToolRequest {
        tool_call_id: Some(call.tool_call_id.clone()),
        session_id: Some(call.session_id.clone()),
        tenant: Some(call.tenant.clone()),
        parameters: call.parameters.clone(),
        checkpoint: None,
        attempt: u32::try_from(call.attempts).unwrap_or(1),
        side_effect_may_have_started: false,
        trace_id: call.trace_id.clone(),
    }
}

/// The sentence for a call cancelled from `status`.
pub(crate) fn cancelled_message(status: Status) -> &'static str {
    match status {
        Status::Prepared => "Okay, I've cancelled it at the final check. Nothing was done.",
        Status::Executing => "Okay, I've stopped it before anything was done.",
        _ => "Okay, I've cancelled that. Nothing was done.",
    }
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
        Err(e) => Err(ToolError::Crashed(ToolFault::new(FaultKind::Misconfigured, e.to_string()))),
    };
    if let Err(e) = &outcome {
        gatehouse_platform::log_line("warn", &format!("discarding the prepared work of {}: {e}", call.tool_call_id));
    }
    // A crash, or an answer outside the contract, leaves the discard owed: sending it again is
    // harmless, and the sweeper does.
    if !matches!(outcome, Err(ToolError::Crashed(_) | ToolError::BrokeContract(_))) {
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
