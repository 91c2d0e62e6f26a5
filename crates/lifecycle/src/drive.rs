//! The executor's drive: run an EXECUTING call up to its checkpoint, or through `execute` to
//! its end. Every step is conditional on the lease, so a worker that was overtaken after its
//! lease ran out can no longer change the call.

use gatehouse_domain::callback::RelayDecision;
use gatehouse_domain::contract::{Checkpoint, Operation, ToolRequest};
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_http::Reply;
use gatehouse_store::{Connection, ToolCall, Transition};
use gatehouse_tool::history::record_cancelled;
use gatehouse_tool::{ToolClient, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::cancel::{cancelled_message, discard};
use crate::rejection;
use crate::{Config, callbacks};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DriveRequest {
    pub tool_call_id: ToolCallId,
    pub lease_owner: String,
}

/// What is left to do once the new state is committed and the caller has its answer.
enum FollowUp {
    Completion(ToolCall),
    Checkpoint(ToolCall, String),
    Discard(ToolCall, Checkpoint),
}

/// A database connection for one step. The drive never holds one across a tool call or a
/// callback: those take seconds, and the tool needs a connection of its own meanwhile.
fn db() -> Result<Connection, ApiError> {
    gatehouse_http::open_db()
}

pub async fn drive(request: DriveRequest) -> Result<Reply, ApiError> {
    let id = &request.tool_call_id;
    let owner = request.lease_owner.as_str();
    let call = gatehouse_store::get_call(&db()?, id)?.ok_or_else(|| rejection::not_found(id))?;
    let mut follow_ups = Vec::new();
    if call.status == Status::Executing {
        let tool = Config::tool(&call.function_name, &call.tool)?;
        run(&tool, call, owner, &mut follow_ups).await?;
    }
    // The answer only says the drive is over; whoever waits on it reads the call itself.
    let body = json!({"tool_call_id": id});
    Ok(Reply::from(gatehouse_http::json_response(200, &body)).then(follow_up(follow_ups)))
}

async fn run(tool: &ToolClient, call: ToolCall, owner: &str, follow_ups: &mut Vec<FollowUp>) -> Result<(), ApiError> {
    let id = call.tool_call_id.clone();
    let mut checkpoint = call.checkpoint.clone();

    if call.prepared_at.is_none() {
        let answer = callbacks::progress(&call, "preparing", "PREPARING").await;
        let (status, body) = answer.map_or((None, Vec::new()), |a| (Some(a.status), a.body));
        if let RelayDecision::Cancel { reason } = RelayDecision::advisory(status, &body) {
            let message = cancelled_message(Status::Executing);
            if let Transition::Applied { after, .. } =
                gatehouse_store::cancel_call(&db()?, &id, Some(&reason), "relay", message)?
            {
                record_cancelled(tool.identity(), Operation::Prepare, &id, call.trace_id.as_deref(), &reason);
                follow_ups.push(FollowUp::Completion(*after));
            }
            return Ok(());
        }
        match tool.prepare(&tool_request(&call)).await {
            Ok(Some(prepared)) => {
                let ttl = Config::checkpoint_ttl_seconds()?;
                match gatehouse_store::mark_prepared(&db()?, &id, owner, &prepared, ttl)? {
                    Transition::Applied { after, .. } => {
                        follow_ups.push(FollowUp::Checkpoint(*after, prepared.message));
                    }
                    // Cancelled (or overtaken) while preparing: undo what prepare did.
                    _ => follow_ups.push(FollowUp::Discard(call, prepared)),
                }
                return Ok(());
            }
            Ok(None) => checkpoint = None,
            Err(error) => return settle_failure(&id, owner, "prepare", error, follow_ups),
        }
    }

    // The point of no return, raced against cancel: exactly one of the two statements wins. It
    // also renews the lease, so a long prepare does not eat into the time execute has.
    let lease_seconds = Config::lease_seconds()?;
    let (before, current) = match gatehouse_store::begin_side_effect(&db()?, &id, owner, lease_seconds)? {
        Transition::Applied { before, after } => (before, after),
        refused => {
            if let Transition::Rejected { current } = &refused
                && current.status == Status::Cancelled
            {
                let reason = "cancelled before the irreversible step";
                record_cancelled(tool.identity(), Operation::Execute, &id, call.trace_id.as_deref(), reason);
            }
            if let Some(checkpoint) = checkpoint {
                follow_ups.push(FollowUp::Discard(call, checkpoint));
            }
            return Ok(());
        }
    };
    let may_have_started = before.side_effect_started_at.is_some();
    let request = ToolRequest { checkpoint, side_effect_may_have_started: may_have_started, ..tool_request(&current) };
    match tool.execute(&request).await {
        Ok(executed) => {
            if let Transition::Applied { after, .. } =
                gatehouse_store::complete_call(&db()?, &id, owner, &executed.result, &executed.voice_response)?
            {
                follow_ups.push(FollowUp::Completion(*after));
            }
            Ok(())
        }
        Err(error) => settle_failure(&id, owner, "execute", error, follow_ups),
    }
}

/// The contract request for an operation on `call`: its parameters, its attempt number, no
/// checkpoint and no side effect yet. Callers override what differs.
pub(crate) fn tool_request(call: &ToolCall) -> ToolRequest {
    ToolRequest {
        tool_call_id: Some(call.tool_call_id.clone()),
        session_id: Some(call.session_id.clone()),
        parameters: call.parameters.clone(),
        checkpoint: None,
        attempt: u32::try_from(call.attempts).unwrap_or(1),
        side_effect_may_have_started: false,
        trace_id: call.trace_id.clone(),
    }
}

/// A refusal from the tool is final: the call is FAILED with the tool's sentence. A crash
/// gives the lease back, so the sweeper re-drives the call, up to the attempt limit.
fn settle_failure(
    id: &ToolCallId,
    owner: &str,
    operation: &str,
    error: ToolError,
    follow_ups: &mut Vec<FollowUp>,
) -> Result<(), ApiError> {
    match error {
        ToolError::Refused(refusal) => {
            let reason = format!("{operation} failed: {}", refusal.error);
            if let Transition::Applied { after, .. } =
                gatehouse_store::fail_call(&db()?, id, owner, &reason, &refusal.error)?
            {
                follow_ups.push(FollowUp::Completion(*after));
            }
        }
        ToolError::Crashed(detail) => {
            let problem = format!("the tool crashed during {operation}: {detail}");
            gatehouse_http::log_line("warn", &format!("{id}: {problem}"));
            gatehouse_store::release_lease(&db()?, id, owner, &problem)?;
        }
    }
    Ok(())
}

async fn follow_up(follow_ups: Vec<FollowUp>) {
    for follow_up in follow_ups {
        match follow_up {
            FollowUp::Completion(call) => callbacks::completion(&call).await,
            FollowUp::Checkpoint(call, message) => callbacks::checkpoint(&call, message).await,
            FollowUp::Discard(call, checkpoint) => discard(&call, checkpoint).await,
        }
    }
}
