//! The two questions a call can wait on (confirm the sentence; go ahead at the checkpoint), as
//! the elicitations that ask them, and the user's answers as the lifecycle takes them. Both a
//! registered tool's rounds (`confirmation`) and the Tasks extension's `tasks/update` (`tasks`)
//! ask and answer them here.

use std::time::Duration;

use gatehouse_domain::{ApiError, Status, ToolCallId};
use gatehouse_lifecycle::{CancelRequest, ConfirmRequest, Ctx, Outcome, Progress, ResumeRequest};
use gatehouse_store::ToolCall;
use rmcp::model::{ElicitResult, ElicitationAction, InputRequests};
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};

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
    pub fn key(self) -> &'static str {
        match self {
            Stage::Confirm => "confirm",
            Stage::Checkpoint => "proceed",
        }
    }

    pub fn parse(key: &str) -> Option<Stage> {
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
    serde_json::from_value(requests).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
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
}
