//! A registered tool (`send_email`, `query_vector_db`) called as an MCP tool of its own, under
//! 2026-07-28, with the confirmation inside the protocol: the call is recorded as PENDING and
//! the answer is `input_required`, an elicitation asking the user to confirm the sentence the
//! tool reads back; the client's retry carries the user's answer, which confirms or cancels
//! that same call. A checkpoint is a second `input_required`. What spans the rounds is the
//! call's id in the signed `requestState`; nothing lives in a session.

use std::time::Duration;

use gatehouse_domain::{ApiError, MAX_WAIT, Status, ToolCallId, sealed};
use gatehouse_lifecycle::{CreateRequest, Ctx, Outcome, Progress};
use rmcp::model::InputRequiredResult;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError};
use crate::protocol::{Era, META_SESSION_ID};
use crate::questions::{Stage, apply, decision, question, responses};
use crate::results::{MethodResult, internal, refusal, tool_result};
use crate::tasks;

/// How long a `requestState` stays good: the call's own deadlines still apply on top.
const STATE_TTL_SECONDS: u64 = 3600;

/// The session a call made without one belongs to (a client may name one in `_meta`).
const DEFAULT_SESSION: &str = "mcp";

/// One round of a registered tool's `tools/call`.
pub async fn call(ctx: &Ctx, era: &Era, name: &str, params: &Value) -> Result<MethodResult, RpcError> {
    if !era.elicitation() {
        return Err(RpcError::new(
            MISSING_CLIENT_CAPABILITY,
            format!("{name} asks the user to confirm through an elicitation; declare the elicitation capability."),
        )
        .with_data(json!({"requiredCapabilities": {"elicitation": {"form": {}}}}))
        .with_status(400));
    }
    match params.get("requestState") {
        None | Some(Value::Null) => create(ctx, name, params).await,
        Some(Value::String(state)) => {
            let secret = secret(ctx)?;
            let Some((stage, id)) = open(&secret, state, name) else {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    "The requestState is not one this server issued for this tool, or it has lapsed.",
                ));
            };
            let responses = responses(params)?;
            match decision(stage, &responses)? {
                None => ask_again(ctx, name, &id).await,
                Some(yes) => decide(ctx, era, name, &id, stage, yes).await,
            }
        }
        Some(_) => Err(RpcError::new(INVALID_PARAMS, "requestState must be the string this server sent.")),
    }
}

async fn create(ctx: &Ctx, name: &str, params: &Value) -> Result<MethodResult, RpcError> {
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(arguments)) => Value::Object(arguments.clone()),
        Some(_) => return Err(RpcError::new(INVALID_PARAMS, "The arguments of tools/call must be an object.")),
    };
    let session = match params.get("_meta").and_then(|meta| meta.get(META_SESSION_ID)) {
        None => DEFAULT_SESSION,
        Some(Value::String(session)) => session.as_str(),
        Some(_) => return Err(RpcError::new(INVALID_PARAMS, format!("_meta's {META_SESSION_ID} must be a string."))),
    };
    let request = CreateRequest {
        session_id: session.to_owned(),
        function: None,
        function_name: Some(name.to_owned()),
        parameters: arguments,
        connection_id: None,
        intent_id: None,
        callback_url: None,
    };
    let trace_id = gatehouse_platform::trace_id();
    match gatehouse_lifecycle::create(ctx, request, None, &trace_id).await {
        Ok(created) => Ok((input_required(ctx, Stage::Confirm, name, &created.tool_call_id, &created.message)?, None)),
        Err(error) => Ok((refusal(&error), None)),
    }
}

/// No answer came back for the question: ask it again, as the call stands now.
async fn ask_again(ctx: &Ctx, name: &str, id: &ToolCallId) -> Result<MethodResult, RpcError> {
    let call = tasks::read(ctx, id).await?;
    match Stage::of(&call) {
        Some((stage, message)) => Ok((input_required(ctx, stage, name, id, &message)?, None)),
        None => Ok((tool_result(&call, call.status == Status::Failed), None)),
    }
}

async fn decide(
    ctx: &Ctx,
    era: &Era,
    name: &str,
    id: &ToolCallId,
    stage: Stage,
    yes: bool,
) -> Result<MethodResult, RpcError> {
    // With the Tasks extension the answer is at once, a task; without, it waits for the call
    // to settle or reach its checkpoint, as `Prefer: wait` would.
    let wait: Option<Duration> = if era.tasks() { None } else { Some(MAX_WAIT) };
    let outcome = apply(ctx, id, stage, yes, wait).await;
    progressed(ctx, era, name, id, outcome).await
}

/// Where a confirm or resume left the call, as this round's answer.
async fn progressed(
    ctx: &Ctx,
    era: &Era,
    name: &str,
    id: &ToolCallId,
    outcome: Result<Outcome<Progress>, ApiError>,
) -> Result<MethodResult, RpcError> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return Ok((refusal(&error), None)),
    };
    let follow_up = outcome.follow_up;
    let answer = match outcome.answer {
        Progress::Running(_) if era.tasks() => tasks::created(&tasks::read(ctx, id).await?),
        Progress::Running(brief) | Progress::Cancelled(brief) => tool_result(&brief, false),
        Progress::Reached(call) => match Stage::of(&call) {
            Some((stage, message)) => input_required(ctx, stage, name, id, &message)?,
            None => tool_result(&call, call.status == Status::Failed),
        },
    };
    Ok((answer, follow_up))
}

fn input_required(ctx: &Ctx, stage: Stage, name: &str, id: &ToolCallId, message: &str) -> Result<Value, RpcError> {
    let state = seal(&secret(ctx)?, stage, name, id);
    let result = InputRequiredResult::new(Some(question(stage, message)?), Some(state));
    serde_json::to_value(result).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
}

fn secret(ctx: &Ctx) -> Result<Vec<u8>, RpcError> {
    ctx.state_secret().map(String::into_bytes).map_err(internal)
}

/// What a `requestState` is sealed for, so no other value this server seals can stand in for one.
const REQUEST_STATE: &str = "gatehouse mcp requestState";

/// `requestState`: which question, which call, which tool, sealed (HMAC-SHA256 with
/// `state_secret`, which no relay holds, timestamped) so that a client can neither forge nor alter
/// it, nor present it on another tool's call or after it lapses. A replay decides nothing twice:
/// the call's own transitions happen at most once.
fn seal(secret: &[u8], stage: Stage, name: &str, id: &ToolCallId) -> String {
    let payload = format!("{}|{}|{}", stage.key(), id, name);
    sealed::seal(secret, REQUEST_STATE, &payload, gatehouse_platform::unix_now())
}

fn open(secret: &[u8], state: &str, name: &str) -> Option<(Stage, ToolCallId)> {
    let payload = sealed::open(secret, REQUEST_STATE, state, gatehouse_platform::unix_now(), STATE_TTL_SECONDS)?;
    let mut parts = payload.splitn(3, '|');
    let (stage, id, tool) = (parts.next()?, parts.next()?, parts.next()?);
    if tool != name {
        return None;
    }
    Some((Stage::parse(stage)?, gatehouse_http::parse_call_id(id).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_state_is_bound_to_its_tool_and_cannot_be_altered() {
        let id = gatehouse_http::parse_call_id("tc_0123456789ab").expect("id");
        let state = seal(b"secret", Stage::Checkpoint, "send_email", &id);
        assert_eq!(open(b"secret", &state, "send_email"), Some((Stage::Checkpoint, id)));
        assert_eq!(open(b"secret", &state, "query_vector_db"), None);
        assert_eq!(open(b"other", &state, "send_email"), None);
        let (payload, signature) = state.split_once('.').expect("two parts");
        let forged = hex::encode(
            String::from_utf8(hex::decode(payload).expect("hex")).expect("utf8").replace("proceed", "confirm"),
        );
        assert_eq!(open(b"secret", &format!("{forged}.{signature}"), "send_email"), None);
        assert_eq!(open(b"secret", "garbage", "send_email"), None);
    }
}
