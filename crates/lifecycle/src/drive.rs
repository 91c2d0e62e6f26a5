//! The executor's drive: walks an EXECUTING call up to its checkpoint, or through `execute` to
//! its end, reaching the tool over the tool contract. Between the steps the relay is told
//! what is happening; only its explicit cancel stops the walk (a progress callback is
//! advisory), and the walk pauses at the checkpoint until the relay resumes the call.

use gatehouse_domain::callback::RelayDecision;
use gatehouse_domain::contract::{Checkpoint, Executed, Operation, ToolRequest};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_platform::OutboundResponse;
use gatehouse_store::{CallToDrive, ToolCall};
use gatehouse_tool::history::record_cancelled;
use gatehouse_tool::{ToolClient, ToolError};
use serde::{Deserialize, Serialize};

use crate::flow::{After, Decision, Policy};
use crate::{Ctx, Driven, Outcome, callbacks, flow, rejection};

/// What confirm, resume and the sweeper hand the executor: the call, and the lease that
/// proves the executor may move it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriveRequest {
    pub tool_call_id: ToolCallId,
    pub lease_owner: String,
}

pub async fn drive(ctx: &Ctx, request: DriveRequest) -> Result<Outcome<Driven>, ApiError> {
    let id = &request.tool_call_id;
    let CallToDrive { call, needs_checkpoint } =
        gatehouse_store::get_call_to_drive(&*ctx.db()?, id)?.ok_or_else(|| rejection::not_found(id))?;
    let (call, after) = if call.status == Status::Executing {
        let tool = ctx.config().tool(&call.function_name, &call.component)?;
        let mut policy = Executor { ctx: ctx.clone(), tool, needs_checkpoint };
        let walked = flow::walk(ctx, call, &request.lease_owner, &mut policy).await?;
        (walked.call, walked.after)
    } else {
        (call, Vec::new())
    };
    let driven = Driven { tool_call_id: id.clone(), call: Some(Box::new(call)) };
    Ok(Outcome::new(driven).then(After::run_all(ctx.clone(), after)))
}

/// The relay's answer to the progress callback before the first operation, `next`: advisory,
/// so only an explicit cancel stops the call, and no answer at all lets it go on.
fn progress_decision(answer: Option<OutboundResponse>, next: Operation) -> Decision {
    let (status, body) = answer.map_or((None, Vec::new()), |a| (Some(a.status), a.body));
    match RelayDecision::advisory(status, &body) {
        RelayDecision::Continue => Decision::Continue,
        RelayDecision::Cancel { reason } => Decision::Cancel { reason, operation: next },
    }
}

struct Executor {
    ctx: Ctx,
    tool: ToolClient,
    /// False for a tool that stops at no checkpoint: its `prepare` has nothing to do, so the
    /// walk goes straight to the irreversible step without asking it (one hop fewer, and no
    /// `prepare` history row for work that never happens).
    needs_checkpoint: bool,
}

impl Executor {
    /// The first operation the walk runs.
    fn first_operation(&self) -> Operation {
        if self.needs_checkpoint { Operation::Prepare } else { Operation::Execute }
    }
}

impl Policy for Executor {
    fn needs_checkpoint(&self) -> bool {
        self.needs_checkpoint
    }

    async fn before_work(&mut self, call: &ToolCall) -> Decision {
        let answer = callbacks::progress(&self.ctx, call, "preparing", "PREPARING").await;
        progress_decision(answer, self.first_operation())
    }

    async fn at_checkpoint(&mut self, _call: &ToolCall, _checkpoint: &Checkpoint) -> Decision {
        Decision::Pause
    }

    async fn prepare(&mut self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError> {
        if !self.needs_checkpoint {
            return Ok(None);
        }
        self.tool.prepare(request).await
    }

    async fn execute(&mut self, request: &ToolRequest) -> Result<Executed, ToolError> {
        self.tool.execute(request).await
    }

    fn cancelled(&mut self, call: &ToolCall, operation: Operation, reason: &str) {
        record_cancelled(self.tool.identity(), operation, &call.tool_call_id, call.trace_id.as_deref(), reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::answered;

    #[test]
    fn an_answer_without_the_call_leaves_the_waiter_to_read_it() {
        let earlier: Result<Driven, _> = serde_json::from_str(r#"{"tool_call_id": "tc_0123456789ab"}"#);
        assert!(earlier.is_ok_and(|driven| driven.call.is_none()), "an executor that does not send the call");
    }

    #[test]
    fn the_progress_callback_is_advisory() {
        let decide = |answer| progress_decision(answer, Operation::Prepare);
        assert_eq!(decide(None), Decision::Continue, "no relay, or no answer");
        assert_eq!(decide(answered(500, "")), Decision::Continue);
        assert_eq!(decide(answered(200, "not json")), Decision::Continue);
        assert_eq!(decide(answered(200, r#"{"continue": false}"#)), Decision::Continue);
    }

    #[test]
    fn only_an_explicit_cancel_stops_the_executor_and_the_first_operation_does_not_run() {
        let cancel = || answered(200, r#"{"cancel": true, "reason": "caller hung up"}"#);
        let decision = progress_decision(cancel(), Operation::Prepare);
        assert_eq!(decision, Decision::Cancel { reason: "caller hung up".into(), operation: Operation::Prepare });
        // A tool without a checkpoint never prepares: the operation a cancel stops is execute.
        let decision = progress_decision(cancel(), Operation::Execute);
        assert_eq!(decision, Decision::Cancel { reason: "caller hung up".into(), operation: Operation::Execute });
    }
}
