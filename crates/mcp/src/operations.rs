//! The eight lifecycle operations as MCP tools, in one table: each operation once, with what
//! `tools/list` says of it (its name, title, description, input schema, hints, and the
//! answers it gives as the REST description's schemas) and the handler `tools/call` runs. A
//! handler takes the arguments apart and calls the very function the operation's REST route
//! calls, and answers that function's typed answer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use gatehouse_domain::contract::ToolDescription;
use gatehouse_domain::{ApiError, MAX_WAIT, ToolCallId};
use gatehouse_lifecycle::{
    CancelRequest, ConfirmRequest, CreateRequest, Ctx, ModifyRequest, Outcome, Progress, ResumeRequest,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

/// One lifecycle operation as an MCP tool.
pub struct Operation {
    pub name: &'static str,
    pub title: &'static str,
    pub description: Description,
    /// The JSON Schema of its arguments. Only `request_tool`'s depends on the registered tools.
    pub input_schema: fn(&[ToolDescription]) -> Value,
    pub hints: Hints,
    /// The REST description's schemas of what it answers: its `outputSchema`.
    pub answers: &'static [&'static str],
    pub run: Handler,
}

/// What an operation does, as `tools/list` says it.
pub enum Description {
    Fixed(&'static str),
    /// This sentence, then every registered tool with its own description.
    ListingTools(&'static str),
}

/// MCP's tool annotations: what running the operation does to the world.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hints {
    pub read_only_hint: bool,
    pub destructive_hint: bool,
    pub idempotent_hint: bool,
    pub open_world_hint: bool,
}

/// Runs an operation on the arguments of its `tools/call`.
pub type Handler = for<'a> fn(&'a Ctx, Map<String, Value>) -> Pin<Box<dyn Future<Output = Answered> + 'a>>;

/// An operation's answer, with the work it goes on with once the answer is out.
pub type Answered = Result<Outcome<Answer>, ApiError>;

/// What an operation answers.
pub enum Answer {
    /// Where a confirm or a resume left the call: to a client that takes tasks, it is answered
    /// with the task that follows the call.
    Progress(Progress),
    /// Any other answer, as its route puts it on the wire.
    Plain(Value),
}

/// The argument that names the call an operation acts on, as the schemas list it and the
/// handlers read it.
const TOOL_CALL_ID: &str = "tool_call_id";

/// A read changes nothing, and gives the same answer until something else changes the call.
const READ_ONLY: Hints =
    Hints { read_only_hint: true, destructive_hint: false, idempotent_hint: true, open_world_hint: false };

pub const OPERATIONS: [Operation; 8] = [
    Operation {
        name: "request_tool",
        title: "Request a tool call",
        description: Description::ListingTools(
            "Records a tool call as PENDING and answers the sentence to read back to the caller for confirmation; \
             nothing runs until confirm_tool. Tools:",
        ),
        input_schema: request_schema,
        hints: Hints { read_only_hint: false, destructive_hint: false, idempotent_hint: false, open_world_hint: false },
        answers: &["CreateResponse"],
        run: |ctx, arguments| Box::pin(request_tool(ctx, arguments)),
    },
    Operation {
        name: "modify_tool",
        title: "Correct a pending tool call",
        description: Description::Fixed(
            "Changes parameters of a PENDING call with a JSON merge patch (null removes a field); \
             the tool validates the result again. Answers the new sentence to read back.",
        ),
        input_schema: |_| {
            object(
                json!({
                    TOOL_CALL_ID: call_id(),
                    "parameters": {"type": "object", "description": "The fields to change, e.g. {\"to\": \"john.smith@gmail.com\"}."},
                    "reason": reason(),
                }),
                &[TOOL_CALL_ID, "parameters"],
            )
        },
        hints: Hints { read_only_hint: false, destructive_hint: false, idempotent_hint: true, open_world_hint: false },
        answers: &["ModifyResponse"],
        run: |ctx, arguments| Box::pin(modify_tool(ctx, arguments)),
    },
    Operation {
        name: "confirm_tool",
        title: "Run a pending tool call",
        description: Description::Fixed(
            "The caller said yes: PENDING becomes EXECUTING and the call runs in the background, \
             up to its checkpoint. Answers at once, or with the state reached within wait_seconds.",
        ),
        input_schema: |_| {
            object(
                json!({
                    TOOL_CALL_ID: call_id(),
                    "callback_url": {"type": "string", "description": "Where progress, checkpoint and completion callbacks go."},
                    "wait_seconds": wait(),
                }),
                &[TOOL_CALL_ID],
            )
        },
        hints: Hints { read_only_hint: false, destructive_hint: true, idempotent_hint: false, open_world_hint: true },
        answers: &["Accepted", "ToolCall"],
        run: |ctx, arguments| Box::pin(confirm_tool(ctx, arguments)),
    },
    Operation {
        name: "cancel_tool",
        title: "Cancel a tool call",
        description: Description::Fixed(
            "Cancels a PENDING or PREPARED call, or an EXECUTING one whose irreversible step has not \
             started; once it has, the answer says it is too late.",
        ),
        input_schema: |_| object(json!({TOOL_CALL_ID: call_id(), "reason": reason()}), &[TOOL_CALL_ID]),
        // At the checkpoint a cancel discards what the tool prepared (a draft, say).
        hints: Hints { read_only_hint: false, destructive_hint: true, idempotent_hint: true, open_world_hint: true },
        answers: &["CancelResponse"],
        run: |ctx, arguments| Box::pin(cancel_tool(ctx, arguments)),
    },
    Operation {
        name: "resume_tool",
        title: "Decide at the checkpoint",
        description: Description::Fixed(
            "At the checkpoint (PREPARED): proceed runs the irreversible step, cancel drops the call \
             and discards what was prepared.",
        ),
        input_schema: |_| {
            object(
                json!({
                    TOOL_CALL_ID: call_id(),
                    "action": {"type": "string", "enum": ["proceed", "cancel"]},
                    "reason": reason(),
                    "wait_seconds": wait(),
                }),
                &[TOOL_CALL_ID, "action"],
            )
        },
        hints: Hints { read_only_hint: false, destructive_hint: true, idempotent_hint: false, open_world_hint: true },
        answers: &["Accepted", "ToolCall", "CancelResponse"],
        run: |ctx, arguments| Box::pin(resume_tool(ctx, arguments)),
    },
    Operation {
        name: "get_status",
        title: "Get a tool call",
        description: Description::Fixed(
            "One call in full: status, parameters, result, voice_response and both histories.",
        ),
        input_schema: |_| object(json!({TOOL_CALL_ID: call_id(), "wait_seconds": wait()}), &[TOOL_CALL_ID]),
        hints: READ_ONLY,
        answers: &["ToolCall"],
        run: |ctx, arguments| Box::pin(get_status(ctx, arguments)),
    },
    Operation {
        name: "get_context",
        title: "Get the session's calls",
        description: Description::Fixed(
            "The session's 20 newest open calls (pending) and 10 newest settled calls (recent), newest first, \
             with how many of each it has (pending_total, recent_total, counted up to 100).",
        ),
        input_schema: |_| object(json!({"session_id": session()}), &["session_id"]),
        hints: READ_ONLY,
        answers: &["ContextResponse"],
        run: |ctx, arguments| Box::pin(async move { get_context(ctx, arguments) }),
    },
    Operation {
        name: "get_session_context",
        title: "Get stored session context",
        description: Description::Fixed("What a tool stored for the session, e.g. last_query_results after a search."),
        input_schema: |_| {
            object(
                json!({
                    "session_id": session(),
                    "context_key": {"type": "string", "description": "e.g. last_query_results"},
                }),
                &["session_id", "context_key"],
            )
        },
        hints: READ_ONLY,
        answers: &["SessionContext"],
        run: |ctx, arguments| Box::pin(async move { get_session_context(ctx, arguments) }),
    },
];

/// The operation called `name`, if it is one.
pub fn find(name: &str) -> Option<&'static Operation> {
    OPERATIONS.iter().find(|operation| operation.name == name)
}

impl Operation {
    /// The operation as `tools/list` lists it; `output_schema` is its answers' schema.
    pub fn listing(&self, tools: &[ToolDescription], output_schema: Value) -> Value {
        let description = match self.description {
            Description::Fixed(text) => text.to_owned(),
            Description::ListingTools(text) => listing_tools(text, tools),
        };
        json!({
            "name": self.name,
            "title": self.title,
            "description": description,
            "inputSchema": (self.input_schema)(tools),
            "annotations": self.hints,
            "outputSchema": output_schema,
        })
    }
}

fn listing_tools(text: &str, tools: &[ToolDescription]) -> String {
    let mut text = text.to_owned();
    for tool in tools {
        let checkpoint =
            if tool.needs_checkpoint { " Stops at a checkpoint before its irreversible step." } else { "" };
        text.push_str(&format!("\n- {}: {}{checkpoint}", tool.name, tool.description));
    }
    text
}

fn call_id() -> Value {
    let description = "The tool_call_id that request_tool answered (tc_ and 12 hex digits).";
    json!({"type": "string", "pattern": "^tc_[0-9a-f]{12}$", "description": description})
}

fn wait() -> Value {
    let description = "Seconds (at most 30) to wait for the call to settle before answering, like Prefer: wait=N.";
    json!({"type": "number", "minimum": 0, "maximum": MAX_WAIT.as_secs(), "description": description})
}

fn reason() -> Value {
    json!({"type": "string", "description": "Why, in the caller's words; kept in the history."})
}

fn session() -> Value {
    json!({"type": "string", "description": "The voice session (conversation) id."})
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// `function_name` is one of the registered names or aliases, and `parameters` must match
/// that tool's own schema.
fn request_schema(tools: &[ToolDescription]) -> Value {
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
            "session_id": session(),
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

/// An answer with follow-up work, as any other answer.
fn plain<T: Serialize>(outcome: Result<Outcome<T>, ApiError>) -> Answered {
    outcome.map(|outcome| outcome.map(|answer| Answer::Plain(serde_json::to_value(answer).unwrap_or(Value::Null))))
}

/// An answer without follow-up work, as any other answer.
fn immediate<T: Serialize>(answer: Result<T, ApiError>) -> Answered {
    plain(answer.map(Outcome::new))
}

/// Where a confirm or a resume left the call.
fn progress(outcome: Result<Outcome<Progress>, ApiError>) -> Answered {
    outcome.map(|outcome| outcome.map(Answer::Progress))
}

async fn request_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let idempotency_key = take::<String>(&mut arguments, "idempotency_key")?;
    let request: CreateRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    let trace_id = gatehouse_platform::trace_id();
    immediate(gatehouse_lifecycle::create(ctx, request, idempotency_key.as_deref(), &trace_id).await)
}

async fn modify_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id_argument(&mut arguments)?;
    let request: ModifyRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    immediate(gatehouse_lifecycle::modify(ctx, &id, request).await)
}

async fn confirm_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id_argument(&mut arguments)?;
    let wait = wait_argument(&mut arguments)?;
    let request: ConfirmRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    progress(gatehouse_lifecycle::confirm(ctx, &id, request, wait).await)
}

async fn cancel_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id_argument(&mut arguments)?;
    let request: CancelRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    plain(gatehouse_lifecycle::cancel(ctx, &id, request).await)
}

async fn resume_tool(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id_argument(&mut arguments)?;
    let wait = wait_argument(&mut arguments)?;
    let request: ResumeRequest = gatehouse_http::from_json_value(Value::Object(arguments))?;
    progress(gatehouse_lifecycle::resume(ctx, &id, request, wait).await)
}

async fn get_status(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let id = call_id_argument(&mut arguments)?;
    let wait = wait_argument(&mut arguments)?;
    no_more(&arguments)?;
    plain(gatehouse_lifecycle::status(ctx, &id, wait).await)
}

fn get_context(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let session = required::<String>(&mut arguments, "session_id")?;
    no_more(&arguments)?;
    immediate(gatehouse_lifecycle::context(ctx, &session))
}

fn get_session_context(ctx: &Ctx, mut arguments: Map<String, Value>) -> Answered {
    let session = required::<String>(&mut arguments, "session_id")?;
    let key = required::<String>(&mut arguments, "context_key")?;
    no_more(&arguments)?;
    immediate(gatehouse_lifecycle::session_context(ctx, &session, &key))
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

fn call_id_argument(arguments: &mut Map<String, Value>) -> Result<ToolCallId, ApiError> {
    gatehouse_http::parse_call_id(&required::<String>(arguments, TOOL_CALL_ID)?)
}

/// `wait_seconds`, as `Prefer: wait=N` would give it: capped at 30 seconds.
fn wait_argument(arguments: &mut Map<String, Value>) -> Result<Option<Duration>, ApiError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_listed_once() {
        let mut names: Vec<&str> = OPERATIONS.iter().map(|operation| operation.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OPERATIONS.len());
        assert!(
            OPERATIONS.iter().all(|operation| find(operation.name).is_some_and(|found| found.name == operation.name))
        );
        assert!(find("send_email").is_none());
    }

    #[test]
    fn every_input_schema_is_a_closed_object_that_requires_what_it_lists() {
        for operation in &OPERATIONS {
            let schema = (operation.input_schema)(&[]);
            assert_eq!((schema["type"].as_str(), &schema["additionalProperties"]), (Some("object"), &json!(false)));
            let properties = schema["properties"].as_object().map(|p| p.keys().cloned().collect::<Vec<_>>());
            let required = schema["required"].as_array().cloned().unwrap_or_default();
            for name in required.iter().filter_map(Value::as_str) {
                let listed = properties.as_ref().is_some_and(|p| p.iter().any(|property| property == name));
                assert!(listed, "{} requires {name} without describing it", operation.name);
            }
        }
    }

    #[test]
    fn only_reads_are_read_only() {
        for operation in &OPERATIONS {
            let read = operation.name.starts_with("get_");
            assert_eq!(operation.hints.read_only_hint, read, "{}", operation.name);
        }
    }
}
