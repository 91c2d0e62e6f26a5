//! `POST /execute-gmail`: a gated direct flow (docs/architecture.md, "Direct flows"). One
//! request records the call and walks it through four gates; the relay must say "continue" at
//! the first two.
//!
//! 1. PREPARING: progress, cancellable.
//! 2. READY_TO_SEND: the draft exists, and the relay confirms with the caller.
//! 3. Send.
//! 4. COMPLETED: the completion callback.

use gatehouse_domain::Status;
use gatehouse_gmail::GmailTool;
use gatehouse_http::{ApiError, Component, Params, Reply, Request};
use gatehouse_lifecycle::{DirectFlow, Gate};
use gatehouse_store::ToolCall;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

const FLOW: DirectFlow = DirectFlow {
    before_work: Gate { name: "PREPARING", progress: "Preparing your email." },
    at_checkpoint: Some("READY_TO_SEND"),
};

/// The tool's own fields of the request; absent optional ones are left out of the parameters.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct EmailFields {
    to: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cc: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bcc: Option<Value>,
    subject: Value,
    body: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reference_context: Option<Value>,
}

pub async fn execute_gmail(component: Component, req: Request, params: Params) -> Result<Reply, ApiError> {
    let (envelope, parameters) = gatehouse_rest::direct_request::<EmailFields>(&req)?;
    let call = FLOW.run(&gatehouse_rest::ctx(&params)?, &GmailTool, component, &envelope, parameters).await?;
    Ok(gatehouse_rest::ok(&answer(&call)))
}

/// `{success, tool_call_id, message_id, thread_id}`, or the outcome that stopped the flow.
fn answer(call: &ToolCall) -> Value {
    let result = call.result.as_ref();
    let field = |name: &str| result.and_then(|r| r.get(name)).cloned().unwrap_or(Value::Null);
    json!({
        "success": call.status == Status::Completed,
        "tool_call_id": call.tool_call_id,
        "status": call.status,
        "message_id": field("message_id"),
        "thread_id": field("thread_id"),
        "message": call.voice_response,
    })
}
