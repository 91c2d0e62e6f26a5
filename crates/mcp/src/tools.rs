//! The lifecycle operations as MCP tools. Each one takes its arguments apart and calls the
//! very function its REST route calls; the typed answer becomes the tool result, an error
//! becomes an `isError` result with the same code and sentence the route would give. Every
//! tool's `outputSchema` is the REST description's schema of the same answers ([`schemas`]).
//!
//! Under 2026-07-28 the registered tools are listed too, as tools of their own
//! ([`confirmation`]), and `confirm_tool` and `resume_tool` answer a task to a client that
//! declared the Tasks extension ([`tasks`]).

use std::time::Duration;

use gatehouse_domain::contract::ToolDescription;
use gatehouse_domain::{ApiError, MAX_WAIT, ToolCallId};
use gatehouse_lifecycle::{
    CancelRequest, ConfirmRequest, CreateRequest, Ctx, FollowUp, ModifyRequest, Outcome, ResumeRequest,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INVALID_PARAMS, RpcError};
use crate::protocol::Era;
use crate::schemas::Definitions;
use crate::{confirmation, tasks};

const TOOL_CALL_ID: &str = "The tool_call_id that request_tool answered (tc_ and 12 hex digits).";
const WAIT: &str = "Seconds (at most 30) to wait for the call to settle before answering, like Prefer: wait=N.";

/// What each lifecycle tool answers: the REST description's schemas of the same answers.
const ANSWERS: [(&str, &[&str]); 8] = [
    ("request_tool", &["CreateResponse"]),
    ("modify_tool", &["ModifyResponse"]),
    ("confirm_tool", &["Accepted", "ToolCall"]),
    ("cancel_tool", &["CancelResponse"]),
    ("resume_tool", &["Accepted", "ToolCall", "CancelResponse"]),
    ("get_status", &["ToolCall"]),
    ("get_context", &["ContextResponse"]),
    ("get_session_context", &["SessionContext"]),
];

/// What a registered tool's final answer is: the call as it settled (or reached within the
/// wait), still running, or cancelled.
const REGISTERED_ANSWERS: &[&str] = &["ToolCall", "Accepted", "CancelResponse"];

/// `tools/list`: the eight operations, and under 2026-07-28 every registered tool as a tool of
/// its own. `request_tool` describes every registered tool's parameters, as the tools describe
/// themselves.
pub async fn list(ctx: &Ctx, era: &Era) -> Result<Value, ApiError> {
    let tools: Vec<ToolDescription> =
        gatehouse_lifecycle::describe_tools(ctx).await?.into_iter().filter_map(|(_, described)| described).collect();
    let definitions = Definitions::load();
    let mut list = operations(&tools);
    for tool in list.iter_mut() {
        let answers = ANSWERS.iter().find(|(name, _)| tool["name"] == *name).map_or(&[][..], |(_, answers)| *answers);
        tool["outputSchema"] = definitions.output_schema(answers);
    }
    if matches!(era, Era::Modern { .. }) {
        list.extend(tools.iter().map(|tool| registered(tool, &definitions)));
        // The list changes only with a deployment; it is behind a bearer token, so private.
        return Ok(json!({"tools": list, "ttlMs": 60_000, "cacheScope": "private"}));
    }
    Ok(json!({"tools": list}))
}

/// A registered tool as an MCP tool: its own parameters, and a confirmation before it acts.
/// Its hints are what the tool says of its effects; a tool that says nothing is claimed only
/// to write (a call is recorded) and is left to the hints' cautious defaults (destructive,
/// not idempotent, open world).
fn registered(tool: &ToolDescription, definitions: &Definitions) -> Value {
    let annotations = match tool.effects {
        Some(effects) => json!({
            "readOnlyHint": effects.read_only,
            "destructiveHint": effects.destructive,
            "idempotentHint": effects.idempotent,
            "openWorldHint": effects.open_world,
        }),
        None => json!({"readOnlyHint": false}),
    };
    let checkpoint = if tool.needs_checkpoint {
        " It stops at a checkpoint and asks again before its irreversible step."
    } else {
        ""
    };
    json!({
        "name": tool.name,
        "description": format!("{} The user is asked to confirm first (an elicitation).{checkpoint}", tool.description),
        "inputSchema": tool.parameters_schema,
        "outputSchema": definitions.output_schema(REGISTERED_ANSWERS),
        "annotations": annotations,
    })
}

fn operations(tools: &[ToolDescription]) -> Vec<Value> {
    let call_id = json!({"type": "string", "pattern": "^tc_[0-9a-f]{12}$", "description": TOOL_CALL_ID});
    let wait = json!({"type": "number", "minimum": 0, "maximum": MAX_WAIT.as_secs(), "description": WAIT});
    let reason = json!({"type": "string", "description": "Why, in the caller's words; kept in the history."});
    let session = json!({"type": "string", "description": "The voice session (conversation) id."});
    let read_only =
        json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false});
    let tools = json!([
        {
            "name": "request_tool",
            "title": "Request a tool call",
            "description": request_description(tools),
            "inputSchema": request_schema(tools, &session),
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false},
        },
        {
            "name": "modify_tool",
            "title": "Correct a pending tool call",
            "description": "Changes parameters of a PENDING call with a JSON merge patch (null removes a field); \
                the tool validates the result again. Answers the new sentence to read back.",
            "inputSchema": object(json!({
                "tool_call_id": call_id,
                "parameters": {"type": "object", "description": "The fields to change, e.g. {\"to\": \"john.smith@gmail.com\"}."},
                "reason": reason,
            }), &["tool_call_id", "parameters"]),
            "annotations": {"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false},
        },
        {
            "name": "confirm_tool",
            "title": "Run a pending tool call",
            "description": "The caller said yes: PENDING becomes EXECUTING and the call runs in the background, \
                up to its checkpoint. Answers at once, or with the state reached within wait_seconds.",
            "inputSchema": object(json!({
                "tool_call_id": call_id,
                "callback_url": {"type": "string", "description": "Where progress, checkpoint and completion callbacks go."},
                "wait_seconds": wait,
            }), &["tool_call_id"]),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        },
        {
            "name": "cancel_tool",
            "title": "Cancel a tool call",
            "description": "Cancels a PENDING or PREPARED call, or an EXECUTING one whose irreversible step has not \
                started; once it has, the answer says it is too late.",
            "inputSchema": object(json!({"tool_call_id": call_id, "reason": reason}), &["tool_call_id"]),
            // At the checkpoint a cancel discards what the tool prepared (a draft, say).
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": true},
        },
        {
            "name": "resume_tool",
            "title": "Decide at the checkpoint",
            "description": "At the checkpoint (PREPARED): proceed runs the irreversible step, cancel drops the call \
                and discards what was prepared.",
            "inputSchema": object(json!({
                "tool_call_id": call_id,
                "action": {"type": "string", "enum": ["proceed", "cancel"]},
                "reason": reason,
                "wait_seconds": wait,
            }), &["tool_call_id", "action"]),
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": true},
        },
        {
            "name": "get_status",
            "title": "Get a tool call",
            "description": "One call in full: status, parameters, result, voice_response and both histories.",
            "inputSchema": object(json!({"tool_call_id": call_id, "wait_seconds": wait}), &["tool_call_id"]),
            "annotations": read_only,
        },
        {
            "name": "get_context",
            "title": "Get the session's calls",
            "description": "The session's 20 newest open calls (pending) and 10 newest settled calls (recent), newest first, with how many of each it has (pending_total, recent_total, counted up to 100).",
            "inputSchema": object(json!({"session_id": session}), &["session_id"]),
            "annotations": read_only,
        },
        {
            "name": "get_session_context",
            "title": "Get stored session context",
            "description": "What a tool stored for the session, e.g. last_query_results after a search.",
            "inputSchema": object(json!({
                "session_id": session,
                "context_key": {"type": "string", "description": "e.g. last_query_results"},
            }), &["session_id", "context_key"]),
            "annotations": read_only,
        },
    ]);
    match tools {
        Value::Array(tools) => tools,
        _ => Vec::new(),
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

fn request_description(tools: &[ToolDescription]) -> String {
    let mut text = String::from(
        "Records a tool call as PENDING and answers the sentence to read back to the caller for confirmation; \
         nothing runs until confirm_tool. Tools:",
    );
    for tool in tools {
        let checkpoint =
            if tool.needs_checkpoint { " Stops at a checkpoint before its irreversible step." } else { "" };
        text.push_str(&format!("\n- {}: {}{checkpoint}", tool.name, tool.description));
    }
    text
}

/// `function_name` is one of the registered names or aliases, and `parameters` must match
/// that tool's own schema.
fn request_schema(tools: &[ToolDescription], session: &Value) -> Value {
    let names: Vec<&str> = tools
        .iter()
        .flat_map(|t| std::iter::once(t.name.as_str()).chain(t.aliases.iter().map(String::as_str)))
        .collect();
    let per_tool: Vec<Value> = tools
        .iter()
        .map(|tool| {
            let names: Vec<&str> =
                std::iter::once(tool.name.as_str()).chain(tool.aliases.iter().map(String::as_str)).collect();
            json!({
                "if": {"properties": {"function_name": {"enum": names}}},
                "then": {"properties": {"parameters": tool.parameters_schema}},
            })
        })
        .collect();
    let mut schema = object(
        json!({
            "session_id": session,
            "function_name": {"type": "string", "enum": names, "description": "Which tool to call."},
            "parameters": {"type": "object", "description": "The tool's parameters, as its schema below says."},
            "connection_id": {"type": "string"},
            "intent_id": {"type": "string", "description": "The relay's id for what the caller asked, echoed in callbacks."},
            "callback_url": {"type": "string", "description": "Where callbacks for this call go."},
            "idempotency_key": {"type": "string", "description": "Makes a retried request answer the first answer."},
        }),
        &["session_id", "function_name", "parameters"],
    );
    schema["allOf"] = Value::Array(per_tool);
    schema
}

/// A `tools/call`: the operation's result, and any work the operation goes on with once that
/// answer is out. Unknown tools are a protocol error.
pub async fn call(ctx: &Ctx, era: &Era, params: &Value) -> Result<(Value, Option<FollowUp>), RpcError> {
    if !params.is_object() {
        return Err(RpcError::new(INVALID_PARAMS, "The params of tools/call must be an object."));
    }
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs the name of a tool."))?;
    // Under 2026-07-28 a registered tool's own name is a tool of its own.
    let operation = ANSWERS.iter().any(|(operation, _)| *operation == name);
    if !operation
        && matches!(era, Era::Modern { .. })
        && gatehouse_lifecycle::is_registered_name(ctx, name).map_err(crate::internal)?
    {
        return confirmation::call(ctx, era, name, params).await;
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => return Err(RpcError::new(INVALID_PARAMS, "The arguments of tools/call must be an object.")),
    };
    let outcome = match name {
        "request_tool" => request_tool(ctx, arguments).await,
        "modify_tool" => modify_tool(ctx, arguments).await,
        "confirm_tool" => confirm_tool(ctx, arguments).await,
        "cancel_tool" => cancel_tool(ctx, arguments).await,
        "resume_tool" => resume_tool(ctx, arguments).await,
        "get_status" => get_status(ctx, arguments).await,
        "get_context" => get_context(ctx, arguments),
        "get_session_context" => get_session_context(ctx, arguments),
        unknown => return Err(RpcError::new(INVALID_PARAMS, format!("Unknown tool: {unknown}"))),
    };
    Ok(match outcome {
        // To a client that takes tasks, running a call answers the task that follows it.
        Ok(outcome) if era.tasks() && matches!(name, "confirm_tool" | "resume_tool") => {
            let id = outcome
                .answer
                .get("tool_call_id")
                .and_then(Value::as_str)
                .and_then(|id| gatehouse_http::parse_call_id(id).ok());
            match id {
                Some(id) => (tasks::created(&tasks::read(ctx, &id).await?), outcome.follow_up),
                None => (tool_result(&outcome.answer, false), outcome.follow_up),
            }
        }
        Ok(outcome) => (tool_result(&outcome.answer, false), outcome.follow_up),
        Err(error) => (refusal(&error), None),
    })
}

/// A refusal as a tool result the agent can speak: the route's code and sentence.
pub fn refusal(error: &ApiError) -> Value {
    gatehouse_platform::log_error(error);
    tool_result(error, true)
}

/// An answer as an MCP tool result: structured content, and the same JSON as text for
/// clients that read only text.
pub fn tool_result(answer: &impl Serialize, is_error: bool) -> Value {
    let body = serde_json::to_value(answer).unwrap_or(Value::Null);
    json!({
        "content": [{"type": "text", "text": body.to_string()}],
        "structuredContent": body,
        "isError": is_error,
    })
}

/// Every operation's answer as one type, with its follow-up work if it has any.
type Answered = Result<Outcome<Value>, ApiError>;

fn answered<T: Serialize>(outcome: Result<Outcome<T>, ApiError>) -> Answered {
    outcome.map(|outcome| outcome.map(|answer| serde_json::to_value(answer).unwrap_or(Value::Null)))
}

fn plain<T: Serialize>(answer: Result<T, ApiError>) -> Answered {
    answered(answer.map(Outcome::new))
}

async fn request_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let idempotency_key = take::<String>(&mut arguments, "idempotency_key")?;
    let request: CreateRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    let trace_id = gatehouse_platform::trace_id();
    plain(gatehouse_lifecycle::create(ctx, request, idempotency_key.as_deref(), &trace_id).await)
}

async fn modify_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id(&mut arguments)?;
    let request: ModifyRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    plain(gatehouse_lifecycle::modify(ctx, &id, request).await)
}

async fn confirm_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id(&mut arguments)?;
    let wait = wait(&mut arguments)?;
    let request: ConfirmRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    answered(gatehouse_lifecycle::confirm(ctx, &id, request, wait).await)
}

async fn cancel_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id(&mut arguments)?;
    let request: CancelRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    answered(gatehouse_lifecycle::cancel(ctx, &id, request).await)
}

async fn resume_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id(&mut arguments)?;
    let wait = wait(&mut arguments)?;
    let request: ResumeRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    answered(gatehouse_lifecycle::resume(ctx, &id, request, wait).await)
}

async fn get_status(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id(&mut arguments)?;
    let wait = wait(&mut arguments)?;
    no_more(&arguments)?;
    answered(gatehouse_lifecycle::status(ctx, &id, wait).await)
}

fn get_context(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let session = required::<String>(&mut arguments, "session_id")?;
    no_more(&arguments)?;
    plain(gatehouse_lifecycle::context(ctx, &session))
}

fn get_session_context(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let session = required::<String>(&mut arguments, "session_id")?;
    let key = required::<String>(&mut arguments, "context_key")?;
    no_more(&arguments)?;
    plain(gatehouse_lifecycle::session_context(ctx, &session, &key))
}

/// Removes an optional argument and reads it as `T`.
fn take<T: DeserializeOwned>(arguments: &mut Map<String, Value>, name: &str) -> Result<Option<T>, ApiError> {
    match arguments.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value).map(Some).map_err(|e| {
            ApiError::invalid_input(format!("The {name} argument is not valid.")).with_field(name, e.to_string())
        }),
    }
}

fn required<T: DeserializeOwned>(arguments: &mut Map<String, Value>, name: &str) -> Result<T, ApiError> {
    take(arguments, name)?.ok_or_else(|| {
        ApiError::invalid_input(format!("The {name} argument is required.")).with_field(name, "is required")
    })
}

fn call_id(arguments: &mut Map<String, Value>) -> Result<ToolCallId, ApiError> {
    gatehouse_http::parse_call_id(&required::<String>(arguments, "tool_call_id")?)
}

/// `wait_seconds`, as `Prefer: wait=N` would give it: capped at 30 seconds.
fn wait(arguments: &mut Map<String, Value>) -> Result<Option<Duration>, ApiError> {
    let Some(seconds) = take::<f64>(arguments, "wait_seconds")? else { return Ok(None) };
    if !seconds.is_finite() || seconds < 0.0 {
        let problem = "must be a number of seconds from 0 to 30";
        return Err(
            ApiError::invalid_input("The wait_seconds argument is not valid.").with_field("wait_seconds", problem)
        );
    }
    Ok(Some(Duration::from_secs_f64(seconds).min(MAX_WAIT)))
}

/// Refuses arguments an operation does not take, as the REST routes refuse unknown fields.
fn no_more(arguments: &Map<String, Value>) -> Result<(), ApiError> {
    match arguments.keys().next() {
        None => Ok(()),
        Some(unknown) => Err(ApiError::invalid_input(format!("The argument {unknown} is not one this tool takes."))
            .with_field(unknown.clone(), "is not a known argument")),
    }
}
