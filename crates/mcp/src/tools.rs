//! `tools/list` and `tools/call`. The lifecycle operations are listed and run from one table
//! ([`operations`]): each becomes an MCP tool whose handler calls the very function its REST
//! route calls; its typed answer becomes the tool result, an error becomes an `isError` result
//! with the same code and sentence the route would give. Every tool's `outputSchema` is the
//! REST description's schema of the same answers ([`schemas`]).
//!
//! Under 2026-07-28 the registered tools are listed too, as tools of their own
//! ([`confirmation`]), and `confirm_tool` and `resume_tool` answer a task to a client that
//! declared the Tasks extension ([`tasks`]).

use gatehouse_domain::ApiError;
use gatehouse_domain::contract::ToolDescription;
use gatehouse_lifecycle::Ctx;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{INVALID_PARAMS, RpcError};
use crate::operations::{Answer, Hints, OPERATIONS};
use crate::protocol::Era;
use crate::results::{MethodResult, internal, refusal, tool_result};
use crate::schemas::Definitions;
use crate::{confirmation, operations, tasks};

/// What a registered tool's final answer is: the call as it settled (or reached within the
/// wait), still running, or cancelled.
const REGISTERED_ANSWERS: &[&str] = &["ToolCall", "Accepted", "CancelResponse"];

/// `tools/list`: the eight operations, and under 2026-07-28 every registered tool as a tool of
/// its own. `request_tool` describes every registered tool's parameters, as the tools describe
/// themselves.
pub async fn list(ctx: &Ctx, era: &Era) -> Result<Value, ApiError> {
    let tools: Vec<ToolDescription> = gatehouse_lifecycle::describe_tools(ctx)
        .await?
        .into_iter()
        .filter_map(|(_, described)| described.ok())
        .collect();
    let definitions = Definitions::load();
    let mut list: Vec<Value> = OPERATIONS
        .iter()
        .map(|operation| operation.listing(&tools, definitions.output_schema(operation.answers)))
        .collect();
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
        Some(effects) => json!(Hints {
            read_only_hint: effects.read_only,
            destructive_hint: effects.destructive,
            idempotent_hint: effects.idempotent,
            open_world_hint: effects.open_world,
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

/// A `tools/call`: the operation's result, and any work the operation goes on with once that
/// answer is out. Unknown tools are a protocol error.
pub async fn call(ctx: &Ctx, era: &Era, params: &Value) -> Result<MethodResult, RpcError> {
    if !params.is_object() {
        return Err(RpcError::new(INVALID_PARAMS, "The params of tools/call must be an object."));
    }
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, "tools/call needs the name of a tool."))?;
    let operation = operations::find(name);
    // Under 2026-07-28 a registered tool's own name is a tool of its own.
    if operation.is_none()
        && matches!(era, Era::Modern { .. })
        && gatehouse_lifecycle::is_registered_name(ctx, name).map_err(internal)?
    {
        return confirmation::call(ctx, era, name, params).await;
    }
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments.clone(),
        Some(_) => return Err(RpcError::new(INVALID_PARAMS, "The arguments of tools/call must be an object.")),
    };
    let Some(operation) = operation else {
        return Err(RpcError::new(INVALID_PARAMS, format!("Unknown tool: {name}")));
    };
    Ok(match (operation.run)(ctx, arguments).await {
        Ok(outcome) => {
            let result = match outcome.answer {
                // To a client that takes tasks, running a call answers the task that follows it.
                Answer::Progress(progress) if era.tasks() => {
                    tasks::created(&tasks::read(ctx, progress.tool_call_id()).await?)
                }
                Answer::Progress(progress) => tool_result(&progress, false),
                Answer::Plain(answer) => tool_result(&answer, false),
            };
            (result, outcome.follow_up)
        }
        Err(error) => (refusal(&error), None),
    })
}
