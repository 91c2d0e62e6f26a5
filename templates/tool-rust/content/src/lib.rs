//! {{project-name | snake_case}}: {{project-description}}
//!
//! A Gatehouse tool (docs/tools.md in the Gatehouse repository, "A tool in any language").
//! Gatehouse holds each call until the caller confirms it, lets the caller correct it, stops at
//! the checkpoint that `prepare` answers, and sends `execute` once; the gatehouse-tool crate keeps
//! the contract around this code and records each operation's history. Replace the bodies of
//! `prepare`, `execute` and `discard` with requests to your backend, keyed by the call's id so a
//! retry can never act twice.

use gatehouse_tool::{
    Checkpoint, Executed, FieldProblem, Tool, ToolDescription, ToolEffects, ToolFailure, ToolRequest, open_db,
};
use serde_json::{Map, Value, json};
use spin_sdk::pg4::{Connection, ParameterValue};

/// The tool's own tables (migrations/), in its own schema.
const QUOTES: &str = "tool_{{project-name | snake_case}}.quotes";

struct {{project-name | pascal_case}};

gatehouse_tool::tool_component!({{project-name | pascal_case}});

/// The order a call's parameters describe (`validate` has accepted them).
fn order(parameters: &Map<String, Value>) -> (&str, i64) {
    let item = parameters.get("item").and_then(Value::as_str).unwrap_or_default();
    (item, parameters.get("quantity").and_then(Value::as_i64).unwrap_or_default())
}

fn call_id(request: &ToolRequest) -> String {
    request.tool_call_id.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// Runs one statement on the tool's tables. A `ToolFailure` is the call's definitive answer, so
/// say what the caller can act on; the error itself stays out of the sentence.
fn run(statement: &str, parameters: &[ParameterValue]) -> Result<(), ToolFailure> {
    let unavailable = |_| ToolFailure::new("The order system is unavailable right now.");
    let db: Connection = open_db().map_err(unavailable)?;
    db.execute(statement, parameters).map(drop).map_err(|_| ToolFailure::new("The order system refused the order."))
}

/// A short, stable reference derived from the call's id.
fn short(text: &str) -> String {
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3));
    format!("{:08X}", hash >> 32)
}

impl Tool for {{project-name | pascal_case}} {
    fn describe(&self) -> ToolDescription {
        ToolDescription {
            name: "{{project-name | snake_case}}".into(),
            description: "{{project-description}}".into(),
            parameters_schema: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "required": ["item", "quantity"],
                "additionalProperties": false,
                "properties": {
                    "item": {"type": "string", "minLength": 1, "maxLength": 100, "description": "what to order"},
                    "quantity": {"type": "integer", "minimum": 1, "maximum": 100}
                },
                "examples": [{"item": "printer paper", "quantity": 3}]
            }),
            needs_checkpoint: true,
            effects: Some(ToolEffects { read_only: false, destructive: false, idempotent: false, open_world: true }),
            ..ToolDescription::default()
        }
    }

    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
        let mut problems = Vec::new();
        match parameters.get("item").and_then(Value::as_str).map(str::trim) {
            None => problems.push(FieldProblem::new("item", "is required")),
            Some(item) if item.is_empty() || item.chars().count() > 100 => {
                problems.push(FieldProblem::new("item", "must be 1 to 100 characters"));
            }
            Some(_) => {}
        }
        match parameters.get("quantity").map(Value::as_i64) {
            None => problems.push(FieldProblem::new("quantity", "is required")),
            Some(Some(1..=100)) => {}
            Some(_) => problems.push(FieldProblem::new("quantity", "must be a whole number from 1 to 100")),
        }
        for name in parameters.keys().filter(|name| !matches!(name.as_str(), "item" | "quantity")) {
            problems.push(FieldProblem::new(name, "is not a parameter of this tool"));
        }
        if problems.is_empty() { Ok(parameters) } else { Err(problems) }
    }

    fn summarize(&self, parameters: &Map<String, Value>) -> String {
        let (item, quantity) = order(parameters);
        format!("I'll order {quantity} of {item}. Shall I?")
    }

    async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure> {
        // The reversible step: a quote, a hold, a draft. Its state comes back in request.checkpoint.
        let (item, quantity) = order(&request.parameters);
        let id = call_id(request);
        run(
            &format!("INSERT INTO {QUOTES} (tool_call_id, item, quantity) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"),
            &[ParameterValue::Str(id.clone()), ParameterValue::Str(item.into()), ParameterValue::Int64(quantity)],
        )?;
        let message = format!("I've got a quote for {quantity} of {item}. Shall I place the order?");
        Ok(Some(Checkpoint { message, state: json!({"quote": format!("Q-{}", short(&id))}) }))
    }

    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure> {
        // The irreversible step, sent once. With request.side_effect_may_have_started, ask your
        // backend first whether the order keyed by the call's id exists, and answer that.
        let id = call_id(request);
        run(&format!("UPDATE {QUOTES} SET ordered = true WHERE tool_call_id = $1"), &[ParameterValue::Str(id.clone())])?;
        let number = format!("O-{}", short(&id));
        Ok(Executed { result: json!({"order": number}), voice_response: format!("Ordered. The order number is {number}.") })
    }

    async fn discard(&self, request: &ToolRequest) -> Result<(), ToolFailure> {
        // Undo what prepare left (release the hold, drop the quote) for a call that will never run.
        let statement = format!("DELETE FROM {QUOTES} WHERE tool_call_id = $1 AND NOT ordered");
        run(&statement, &[ParameterValue::Str(call_id(request))])
    }
}
