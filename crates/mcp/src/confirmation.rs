//! A registered tool (`send_email`, `query_vector_db`) called as an MCP tool of its own, under
//! 2026-07-28, with the confirmation inside the protocol: the call is recorded as PENDING and
//! the answer is `input_required`, an elicitation asking the user to confirm the sentence the
//! tool reads back; the client's retry carries the user's answer, which confirms or cancels
//! that same call. A checkpoint is a second `input_required`. What spans the rounds is the
//! call's id in the signed `requestState`; nothing lives in a session.

use std::time::Duration;

use gatehouse_domain::{ApiError, MAX_WAIT, Status, ToolCallId, callback};
use gatehouse_lifecycle::{
    CancelRequest, ConfirmRequest, CreateRequest, Ctx, FollowUp, Outcome, Progress, ResumeRequest,
};
use gatehouse_store::ToolCall;
use rmcp::model::{ElicitResult, ElicitationAction, InputRequests, InputRequiredResult};
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError};
use crate::protocol::{Era, META_SESSION_ID};
use crate::{tasks, tools};

/// How long a `requestState` stays good: the call's own deadlines still apply on top.
const STATE_TTL_SECONDS: u64 = 3600;

/// The session a call made without one belongs to (a client may name one in `_meta`).
const DEFAULT_SESSION: &str = "mcp";

/// The two questions a call can wait on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// PENDING: the sentence to confirm.
    Confirm,
    /// PREPARED: go ahead with the irreversible step?
    Checkpoint,
}

impl Stage {
    /// The `inputRequests` key, and the boolean the form asks for.
    fn key(self) -> &'static str {
        match self {
            Stage::Confirm => "confirm",
            Stage::Checkpoint => "proceed",
        }
    }

    fn parse(key: &str) -> Option<Stage> {
        [Stage::Confirm, Stage::Checkpoint].into_iter().find(|stage| stage.key() == key)
    }

    /// The question a call at this status waits on, and the sentence that asks it.
    pub fn of(call: &ToolCall) -> Option<(Stage, String)> {
        match call.status {
            Status::Pending => {
                let message = call.summary.clone().unwrap_or_else(|| format!("Run {}?", call.function_name));
                Some((Stage::Confirm, message))
            }
            Status::Prepared => {
                let message = call
                    .checkpoint
                    .as_ref()
                    .map(|checkpoint| checkpoint.message.clone())
                    .or_else(|| call.voice_response.clone())
                    .unwrap_or_else(|| "Everything is ready. Go ahead?".to_owned());
                Some((Stage::Checkpoint, message))
            }
            _ => None,
        }
    }
}

/// The elicitation that asks one question: a form with one yes-or-no field.
pub fn question(stage: Stage, message: &str) -> Result<InputRequests, RpcError> {
    let key = stage.key();
    let requests = json!({key: {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {key: {"type": "boolean", "title": key, "description": "The user's yes or no."}},
                "required": [key],
            },
        },
    }});
    serde_json::from_value(requests).map_err(|e| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, e.to_string()))
}

/// The user's answer to `stage` among `responses`: `None` if it is not there.
pub fn decision(stage: Stage, responses: &Map<String, Value>) -> Result<Option<bool>, RpcError> {
    let Some(response) = responses.get(stage.key()) else { return Ok(None) };
    let answer: ElicitResult = serde_json::from_value(response.clone()).map_err(|e| {
        RpcError::new(INVALID_PARAMS, format!("inputResponses.{} is not an elicitation result: {e}", stage.key()))
    })?;
    let yes = answer.content.as_ref().and_then(|content| content.get(stage.key())).and_then(Value::as_bool);
    Ok(Some(answer.action == ElicitationAction::Accept && yes == Some(true)))
}

/// The answers the user gave, if any; an object, or a protocol error.
pub fn responses(params: &Value) -> Result<Map<String, Value>, RpcError> {
    match params.get("inputResponses") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(responses)) => Ok(responses.clone()),
        Some(_) => Err(RpcError::new(INVALID_PARAMS, "inputResponses must be an object.")),
    }
}

type Answer = (Value, Option<FollowUp>);

/// One round of a registered tool's `tools/call`.
pub async fn call(ctx: &Ctx, era: &Era, name: &str, params: &Value) -> Result<Answer, RpcError> {
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

async fn create(ctx: &Ctx, name: &str, params: &Value) -> Result<Answer, RpcError> {
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
    let created = match gatehouse_lifecycle::create(ctx, request, None, &trace_id).await {
        Ok(created) => created,
        Err(error) => return Ok((tools::refusal(&error), None)),
    };
    let id = created.get("tool_call_id").and_then(Value::as_str).and_then(|id| gatehouse_http::parse_call_id(id).ok());
    let message = created.get("message").and_then(Value::as_str);
    let (Some(id), Some(message)) = (id, message) else {
        return Err(RpcError::new(crate::jsonrpc::INTERNAL_ERROR, "The created call has no id or sentence."));
    };
    Ok((input_required(ctx, Stage::Confirm, name, &id, message)?, None))
}

/// No answer came back for the question: ask it again, as the call stands now.
async fn ask_again(ctx: &Ctx, name: &str, id: &ToolCallId) -> Result<Answer, RpcError> {
    let call = tasks::read(ctx, id).await?;
    match Stage::of(&call) {
        Some((stage, message)) => Ok((input_required(ctx, stage, name, id, &message)?, None)),
        None => Ok((tools::tool_result(&call, call.status == Status::Failed), None)),
    }
}

async fn decide(
    ctx: &Ctx,
    era: &Era,
    name: &str,
    id: &ToolCallId,
    stage: Stage,
    yes: bool,
) -> Result<Answer, RpcError> {
    // With the Tasks extension the answer is at once, a task; without, it waits for the call
    // to settle or reach its checkpoint, as `Prefer: wait` would.
    let wait: Option<Duration> = if era.tasks() { None } else { Some(MAX_WAIT) };
    let outcome = apply(ctx, id, stage, yes, wait).await;
    progressed(ctx, era, name, id, outcome).await
}

/// The user's answer to a question, as the lifecycle takes it: yes to the sentence confirms,
/// no cancels; at the checkpoint yes proceeds and no cancels there.
pub async fn apply(
    ctx: &Ctx,
    id: &ToolCallId,
    stage: Stage,
    yes: bool,
    wait: Option<Duration>,
) -> Result<Outcome<Progress>, ApiError> {
    match (stage, yes) {
        (Stage::Confirm, true) => {
            gatehouse_lifecycle::confirm(ctx, id, ConfirmRequest { callback_url: None }, wait).await
        }
        (Stage::Confirm, false) => {
            let reason = Some("The user declined when asked to confirm.".to_owned());
            gatehouse_lifecycle::cancel(ctx, id, CancelRequest { reason }).await.map(|o| o.map(Progress::Cancelled))
        }
        (Stage::Checkpoint, proceed) => {
            let (action, reason) =
                if proceed { ("proceed", None) } else { ("cancel", Some("The user declined at the checkpoint.")) };
            let request = ResumeRequest { action: action.to_owned(), reason: reason.map(str::to_owned) };
            gatehouse_lifecycle::resume(ctx, id, request, wait).await
        }
    }
}

/// Where a confirm or resume left the call, as this round's answer.
async fn progressed(
    ctx: &Ctx,
    era: &Era,
    name: &str,
    id: &ToolCallId,
    outcome: Result<Outcome<Progress>, ApiError>,
) -> Result<Answer, RpcError> {
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(error) => return Ok((tools::refusal(&error), None)),
    };
    let follow_up = outcome.follow_up;
    let answer = match outcome.answer {
        Progress::Running(_) if era.tasks() => tasks::created(&tasks::read(ctx, id).await?),
        Progress::Running(brief) | Progress::Cancelled(brief) => tools::tool_result(&brief, false),
        Progress::Reached(call) => match Stage::of(&call) {
            Some((stage, message)) => input_required(ctx, stage, name, id, &message)?,
            None => tools::tool_result(&call, call.status == Status::Failed),
        },
    };
    Ok((answer, follow_up))
}

fn input_required(ctx: &Ctx, stage: Stage, name: &str, id: &ToolCallId, message: &str) -> Result<Value, RpcError> {
    let state = seal(&secret(ctx)?, stage, name, id);
    let result = InputRequiredResult::new(Some(question(stage, message)?), Some(state));
    serde_json::to_value(result).map_err(|e| RpcError::new(crate::jsonrpc::INTERNAL_ERROR, e.to_string()))
}

fn secret(ctx: &Ctx) -> Result<Vec<u8>, RpcError> {
    ctx.state_secret().map(String::into_bytes).map_err(crate::internal)
}

/// The bytes a `requestState` signs: its own purpose first, so no other signature of this
/// server's can stand in for one.
fn signed(payload: &str) -> Vec<u8> {
    [b"gatehouse mcp requestState\n".as_slice(), payload.as_bytes()].concat()
}

/// `requestState`: which question, which call, which tool, signed (HMAC-SHA256 with
/// `state_secret`, which no relay holds, timestamped) so that a client can neither forge nor alter it, nor present
/// it on another tool's call or after it lapses. A replay decides nothing twice: the call's
/// own transitions happen at most once.
fn seal(secret: &[u8], stage: Stage, name: &str, id: &ToolCallId) -> String {
    let payload = format!("{}|{}|{}", stage.key(), id, name);
    let signature = callback::sign(secret, gatehouse_platform::unix_now(), &signed(&payload));
    format!("{}.{}", hex::encode(payload), signature)
}

fn open(secret: &[u8], state: &str, name: &str) -> Option<(Stage, ToolCallId)> {
    let (payload, signature) = state.split_once('.')?;
    let payload = String::from_utf8(hex::decode(payload).ok()?).ok()?;
    let now = gatehouse_platform::unix_now();
    if !callback::verify(secret, signature, &signed(&payload), now, STATE_TTL_SECONDS) {
        return None;
    }
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
    fn questions_are_elicitations_the_sdk_reads() {
        let requests = question(Stage::Checkpoint, "Send it?").expect("a valid elicitation");
        let wire = serde_json::to_value(&requests).expect("serializes");
        assert_eq!(wire["proceed"]["method"], "elicitation/create");
        assert_eq!(wire["proceed"]["params"]["message"], "Send it?");
        assert_eq!(wire["proceed"]["params"]["requestedSchema"]["required"], json!(["proceed"]));
    }

    #[test]
    fn decisions() {
        let answer = |value: Value| decision(Stage::Confirm, value.as_object().expect("object"));
        assert_eq!(answer(json!({"confirm": {"action": "accept", "content": {"confirm": true}}})), Ok(Some(true)));
        assert_eq!(answer(json!({"confirm": {"action": "accept", "content": {"confirm": false}}})), Ok(Some(false)));
        assert_eq!(answer(json!({"confirm": {"action": "decline"}})), Ok(Some(false)));
        assert_eq!(answer(json!({"confirm": {"action": "cancel"}})), Ok(Some(false)));
        assert_eq!(answer(json!({"other": {"action": "accept"}})), Ok(None));
        assert_eq!(answer(json!({"confirm": [1]})).map_err(|e| e.code), Err(INVALID_PARAMS));
    }

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
