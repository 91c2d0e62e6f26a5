//! The executor's drive: walks an EXECUTING call up to its checkpoint, or through `execute` to
//! its end, reaching the tool over the tool contract. Between the steps the relay is told
//! what is happening; only its explicit cancel stops the walk (a progress callback is
//! advisory), and the walk pauses at the checkpoint until the relay resumes the call.

use gatehouse_domain::callback::RelayDecision;
use gatehouse_domain::contract::{Checkpoint, Executed, Operation, ToolRequest};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_platform::OutboundResponse;
use gatehouse_store::ToolCall;
use gatehouse_tool::history::record_cancelled;
use gatehouse_tool::{ToolClient, ToolError};
use serde::{Deserialize, Serialize};

use crate::flow::{After, Decision, Policy};
use crate::{Ctx, Outcome, callbacks, flow, rejection};

/// What confirm, resume and the sweeper hand the executor: the call, and the lease that
/// proves the executor may move it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriveRequest {
    pub tool_call_id: ToolCallId,
    pub lease_owner: String,
}

/// The drive's answer only says it is over; whoever waits on it reads the call itself.
#[derive(Debug, Clone, Serialize)]
pub struct Driven {
    pub tool_call_id: ToolCallId,
}

pub async fn drive(ctx: &Ctx, request: DriveRequest) -> Result<Outcome<Driven>, ApiError> {
    let id = &request.tool_call_id;
    let call = gatehouse_store::get_call(&*ctx.db()?, id)?.ok_or_else(|| rejection::not_found(id))?;
    let mut after = Vec::new();
    if call.status == Status::Executing {
        let tool = ctx.config().tool(&call.function_name, &call.component)?;
        let mut policy = Executor { ctx: ctx.clone(), tool };
        after = flow::walk(ctx, call, &request.lease_owner, &mut policy).await?.after;
    }
    Ok(Outcome::new(Driven { tool_call_id: id.clone() }).then(After::run_all(ctx.clone(), after)))
}

/// The relay's answer to the progress callback before `prepare`: advisory, so only an explicit
/// cancel stops the call, and no answer at all lets it go on.
fn progress_decision(answer: Option<OutboundResponse>) -> Decision {
    let (status, body) = answer.map_or((None, Vec::new()), |a| (Some(a.status), a.body));
    match RelayDecision::advisory(status, &body) {
        RelayDecision::Continue => Decision::Continue,
        RelayDecision::Cancel { reason } => Decision::Cancel { reason, operation: Operation::Prepare },
    }
}

struct Executor {
    ctx: Ctx,
    tool: ToolClient,
}

impl Policy for Executor {
    async fn before_work(&mut self, call: &ToolCall) -> Decision {
        progress_decision(callbacks::progress(&self.ctx, call, "preparing", "PREPARING").await)
    }

    async fn at_checkpoint(&mut self, _call: &ToolCall, _checkpoint: &Checkpoint) -> Decision {
        Decision::Pause
    }

    async fn prepare(&mut self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError> {
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
    fn the_progress_callback_is_advisory() {
        assert_eq!(progress_decision(None), Decision::Continue, "no relay, or no answer");
        assert_eq!(progress_decision(answered(500, "")), Decision::Continue);
        assert_eq!(progress_decision(answered(200, "not json")), Decision::Continue);
        assert_eq!(progress_decision(answered(200, r#"{"continue": false}"#)), Decision::Continue);
    }

    #[test]
    fn only_an_explicit_cancel_stops_the_executor_and_prepare_does_not_run() {
        let decision = progress_decision(answered(200, r#"{"cancel": true, "reason": "caller hung up"}"#));
        assert_eq!(decision, Decision::Cancel { reason: "caller hung up".into(), operation: Operation::Prepare });
    }
}
