//! The Tasks extension (`io.modelcontextprotocol/tasks`) over the lifecycle. A task is a tool
//! call: its id is the call's id, its status follows the call's (EXECUTING is `working`;
//! PENDING and PREPARED are `input_required`, asking the question the call waits on;
//! COMPLETED and FAILED are `completed` with the tool result, `isError` when it failed, since
//! the extension keeps `failed` for JSON-RPC errors; CANCELLED and EXPIRED are `cancelled`).
//! `tasks/update` answers that question and `tasks/cancel` is the lifecycle's cancel. The
//! extension lets a server merely acknowledge a cancel it will not honour; this one refuses it
//! with an error carrying the lifecycle's sentence (the side effect has started, the call has
//! settled), so that the client can tell the user the truth.

use gatehouse_domain::{ApiError, ErrorCode, Status, ToolCallId};
use gatehouse_lifecycle::{CancelRequest, Ctx};
use gatehouse_store::ToolCall;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskAckResult, TaskPayload, TaskStatus};
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INTERNAL_ERROR, INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, REFUSED, RpcError};
use crate::protocol::{self, TASKS_EXTENSION};
use crate::questions::{self, Stage};
use crate::results::{MethodResult, internal, tool_result};

/// How often a client should poll a working task.
const POLL_INTERVAL_MS: u64 = 500;

/// A task method from a client that did not declare the extension on this request.
pub fn not_declared() -> RpcError {
    RpcError::new(MISSING_CLIENT_CAPABILITY, format!("The task methods need the {TASKS_EXTENSION} extension declared."))
        .with_data(json!({"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}))
        .with_status(400)
}

/// The call, for a task method: an unknown id is the client's mistake.
pub async fn read(ctx: &Ctx, id: &ToolCallId) -> Result<ToolCall, RpcError> {
    match gatehouse_lifecycle::status(ctx, id, None).await {
        Ok(outcome) => Ok(outcome.answer),
        Err(error) if error.code == ErrorCode::NotFound => Err(unknown_task(id.as_str())),
        Err(error) => Err(internal(error)),
    }
}

fn unknown_task(id: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("No task {id}: it is not a tool call this server knows."))
}

/// A task method's params: an object with a `taskId` that is a tool call id.
fn task_params(params: &Value) -> Result<(&Map<String, Value>, ToolCallId), RpcError> {
    let Value::Object(params) = params else {
        return Err(RpcError::new(INVALID_PARAMS, "A task method's params must be an object with a taskId."));
    };
    let Some(Value::String(task_id)) = params.get("taskId") else {
        return Err(RpcError::new(INVALID_PARAMS, "taskId is required, a string."));
    };
    let id = gatehouse_http::parse_call_id(task_id).map_err(|_| unknown_task(task_id))?;
    Ok((params, id))
}

/// `CreateTaskResult`: what `confirm_tool`, `resume_tool` and a confirmed registry tool
/// answer to a client that declared the extension.
pub fn created(call: &ToolCall) -> Value {
    serde_json::to_value(CreateTaskResult::new(task(call))).unwrap_or(Value::Null)
}

/// `tasks/get`: the call's state as a task, with the question it waits on or its outcome.
pub async fn get(ctx: &Ctx, params: &Value) -> Result<Value, RpcError> {
    let (_, id) = task_params(params)?;
    let call = read(ctx, &id).await?;
    let payload = match call.status {
        Status::Executing => TaskPayload::Working,
        Status::Pending | Status::Prepared => match Stage::of(&call) {
            Some((stage, message)) => {
                TaskPayload::InputRequired { input_requests: questions::question(stage, &message)? }
            }
            None => TaskPayload::Working,
        },
        Status::Completed | Status::Failed => {
            let result = object(protocol::complete(tool_result(&call, call.status == Status::Failed)));
            TaskPayload::Completed { result }
        }
        Status::Cancelled | Status::Expired => TaskPayload::Cancelled,
    };
    let result = GetTaskResult::new(DetailedTask::new(task(&call), payload));
    serde_json::to_value(result).map_err(|e| RpcError::new(INTERNAL_ERROR, e.to_string()))
}

/// `tasks/update`: the user's answer to the question the call waits on. Answers to any other
/// question (one already answered, a key this server never asked) are ignored, as the
/// extension says; a refusal of the answer itself is an error.
pub async fn update(ctx: &Ctx, params: &Value) -> Result<MethodResult, RpcError> {
    let (params, id) = task_params(params)?;
    let responses = questions::responses(&Value::Object(params.clone()))?;
    let call = read(ctx, &id).await?;
    let Some((stage, _)) = Stage::of(&call) else { return Ok((ack(), None)) };
    let Some(yes) = questions::decision(stage, &responses)? else { return Ok((ack(), None)) };
    let outcome = questions::apply(ctx, &id, stage, yes, None).await;
    outcome.map(|outcome| (ack(), outcome.follow_up)).map_err(refused)
}

/// `tasks/cancel`: the lifecycle's cancel. Once the irreversible step has started (or the call
/// has settled) the cancel is refused, and the error says why.
pub async fn cancel(ctx: &Ctx, params: &Value) -> Result<MethodResult, RpcError> {
    let (_, id) = task_params(params)?;
    let reason = Some("Cancelled through tasks/cancel.".to_owned());
    match gatehouse_lifecycle::cancel(ctx, &id, CancelRequest { reason }).await {
        Ok(outcome) => Ok((ack(), outcome.follow_up)),
        Err(error) if error.code == ErrorCode::NotFound => Err(unknown_task(id.as_str())),
        Err(error) => Err(refused(error)),
    }
}

fn refused(error: ApiError) -> RpcError {
    gatehouse_platform::log_error(&error);
    let data = serde_json::to_value(&error).unwrap_or(Value::Null);
    RpcError::new(REFUSED, error.message).with_data(data)
}

fn ack() -> Value {
    serde_json::to_value(TaskAckResult::new()).unwrap_or(Value::Null)
}

fn task(call: &ToolCall) -> Task {
    let status = match call.status {
        Status::Executing => TaskStatus::Working,
        Status::Pending | Status::Prepared => TaskStatus::InputRequired,
        Status::Completed | Status::Failed => TaskStatus::Completed,
        Status::Cancelled | Status::Expired => TaskStatus::Cancelled,
    };
    let updated = [&call.completed_at, &call.prepared_at, &call.executed_at, &call.confirmed_at]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(&call.created_at);
    let mut task = Task::new(call.tool_call_id.as_str(), status, &call.created_at, updated)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    let message = match Stage::of(call) {
        Some((_, question)) => Some(question),
        None if call.status == Status::Expired => {
            Some("Nobody decided in time: the call expired and nothing was done.".to_owned())
        }
        None => call.voice_response.clone().or_else(|| call.error_message.clone()),
    };
    if let Some(message) = message {
        task = task.with_status_message(message);
    }
    task
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}
