//! What the contract server makes sure of before a tool acts on a call: the request's
//! signature is spent once, and the operation is the one the call is waiting for, claimed once
//! for its attempt. A replayed or duplicated request is answered from what the call recorded,
//! and does nothing (docs/architecture.md, "Signed hops").

use gatehouse_domain::contract::{Executed, Operation, Prepared, ToolRefusal, ToolRequest};
use gatehouse_domain::signing::Refusal;
use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_http::Request;
use gatehouse_store::{ClaimedOperation, OperationClaim, ToolCall};
use serde_json::Value;

/// Spends the nonce of a signed service request, whatever its operation (a `describe` too: the
/// contract accepts every nonce once): the first time it passes, a replay within the
/// signature's window is refused with 401 `signature_replayed`. A request that came by service
/// chaining with no `contract_secret` set carries no signature, and passes.
pub fn spend_service_signature(req: &Request) -> Result<(), ApiError> {
    let Some(signed) = gatehouse_http::signed_nonce(req)? else { return Ok(()) };
    let db = gatehouse_platform::open_db()?;
    if gatehouse_store::spend_nonce(&db, &signed.nonce, signed.expires_at)? {
        Ok(())
    } else {
        Err(Refusal::Replayed.into())
    }
}

/// What to do with an operation that acts on a call.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// Act, on the call as the database has it (its parameters, its checkpoint, its attempt).
    Act(ToolRequest),
    /// Do nothing and answer what the call recorded: the operation already ran.
    Recorded(Value),
    /// Do nothing and answer the failure the call recorded.
    RecordedFailure(ToolRefusal),
}

/// Decides whether `prepare`, `execute` or `discard` may act on the call `request` names.
/// The request's own parameters and checkpoint are not trusted: the call's are used.
pub(crate) fn guard(op: Operation, request: &ToolRequest) -> Result<Guarded, ApiError> {
    let id = request.tool_call_id.as_ref().ok_or_else(|| {
        ApiError::invalid_input(format!("A {} needs the call's tool_call_id.", op.as_str()))
            .with_field("tool_call_id", "is required")
    })?;
    let db = gatehouse_platform::open_db()?;
    let claimed = match op {
        Operation::Prepare => ClaimedOperation::Prepare,
        Operation::Execute => ClaimedOperation::Execute,
        Operation::Discard => return discard(&db, id, request),
        Operation::Describe | Operation::Validate | Operation::Summarize => {
            return Err(ApiError::internal().with_detail(format!("{} does not act on a call", op.as_str())));
        }
    };
    match gatehouse_store::claim_operation(&db, id, claimed, request.attempt)? {
        OperationClaim::Claimed { call, execute_claimed_before } => {
            let may_have_started =
                op == Operation::Execute && (execute_claimed_before || request.side_effect_may_have_started);
            Ok(Guarded::Act(as_recorded(&call, request, may_have_started)))
        }
        OperationClaim::Refused { current } => recorded(op, &current),
        OperationClaim::NotFound => Err(ApiError::not_found("No tool call has that id.")),
    }
}

/// `discard` undoes what `prepare` left, only for a call that will never run: cancelled,
/// expired or failed. The recorded checkpoint is used; a call cancelled while it was being
/// prepared never recorded one, and then the caller's is.
fn discard(db: &gatehouse_store::Connection, id: &ToolCallId, request: &ToolRequest) -> Result<Guarded, ApiError> {
    let call = gatehouse_store::get_call(db, gatehouse_store::Caller::Gatehouse, id)?
        .ok_or_else(|| ApiError::not_found("No tool call has that id."))?;
    if !matches!(call.status, Status::Cancelled | Status::Expired | Status::Failed) {
        return Err(ApiError::invalid_state(
            "Only a call that will never run can have its preparation discarded.",
            id.clone(),
            call.status,
        ));
    }
    let checkpoint = call.checkpoint.clone().or_else(|| request.checkpoint.clone());
    Ok(Guarded::Act(ToolRequest { checkpoint, ..as_recorded(&call, request, false) }))
}

/// The request as the call has it.
fn as_recorded(call: &ToolCall, request: &ToolRequest, may_have_started: bool) -> ToolRequest {
    ToolRequest {
        tool_call_id: Some(call.tool_call_id.clone()),
        session_id: Some(call.session_id.clone()),
        tenant: Some(call.tenant.clone()),
        parameters: call.parameters.clone(),
        checkpoint: call.checkpoint.clone(),
        attempt: u32::try_from(call.attempts).unwrap_or(request.attempt),
        side_effect_may_have_started: may_have_started,
        trace_id: call.trace_id.clone().or_else(|| request.trace_id.clone()),
    }
}

/// The answer to an operation whose claim was refused: what the call recorded, if the
/// operation already ran; otherwise 409, and nothing is done.
fn recorded(op: Operation, call: &ToolCall) -> Result<Guarded, ApiError> {
    let id = call.tool_call_id.clone();
    match (op, call.status) {
        // A call that will never run (cancelled, expired, failed) had its preparation
        // discarded, or will have: a prepare then is out of order (409, below).
        (Operation::Prepare, Status::Prepared | Status::Executing | Status::Completed)
            if call.prepared_at.is_some() =>
        {
            let prepared = Prepared { checkpoint: call.checkpoint.clone() };
            Ok(Guarded::Recorded(serde_json::to_value(prepared).map_err(encoding)?))
        }
        (Operation::Execute, Status::Completed) => {
            let executed = Executed {
                result: call.result.clone().unwrap_or(Value::Null),
                voice_response: call.voice_response.clone().unwrap_or_default(),
            };
            Ok(Guarded::Recorded(serde_json::to_value(executed).map_err(encoding)?))
        }
        (Operation::Execute, Status::Failed) => Ok(Guarded::RecordedFailure(ToolRefusal::saying(
            call.voice_response.clone().or_else(|| call.error_message.clone()).unwrap_or_default(),
        ))),
        (_, Status::Executing) => Err(ApiError::invalid_state(
            format!("This call's {} is already under way for its current attempt, or is not due.", op.as_str()),
            id,
            call.status,
        )),
        _ => {
            Err(ApiError::invalid_state(format!("This call is not waiting for its {}.", op.as_str()), id, call.status))
        }
    }
}

fn encoding(error: serde_json::Error) -> ApiError {
    ApiError::internal().with_detail(format!("encoding a recorded answer: {error}"))
}
