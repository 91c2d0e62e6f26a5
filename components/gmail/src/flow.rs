//! `POST /execute-gmail`: the gated direct flow of SPEC §7. One request records the call and
//! walks it through four gates; the relay must say "continue" at the first two.
//!
//! 1. PREPARING: progress, cancellable.
//! 2. READY_TO_SEND: the draft exists, and the relay confirms with the caller.
//! 3. Send.
//! 4. COMPLETED: the completion callback.

use gatehouse_domain::Status;
use gatehouse_gmail::GmailTool;
use gatehouse_http::{ApiError, Component, Reply, Request};
use gatehouse_lifecycle::{Ctx, DirectFlow, Envelope, Gate};
use gatehouse_store::ToolCall;
use serde::Deserialize;
use serde_json::{Map, Value, json};

const FLOW: DirectFlow = DirectFlow {
    before_work: Gate { name: "PREPARING", progress: "Preparing your email." },
    at_checkpoint: Some("READY_TO_SEND"),
};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectRequest {
    session_id: String,
    #[serde(default)]
    intent_id: Option<String>,
    #[serde(default)]
    connection_id: Option<String>,
    callback_url: String,
    to: Value,
    #[serde(default)]
    cc: Option<Value>,
    #[serde(default)]
    bcc: Option<Value>,
    subject: Value,
    body: Value,
    #[serde(default)]
    reference_context: Option<Value>,
}

pub async fn execute_gmail(component: Component, req: Request) -> Result<Reply, ApiError> {
    let request: DirectRequest = gatehouse_http::read_json(&req)?;
    let envelope = Envelope {
        session_id: request.session_id,
        intent_id: request.intent_id,
        connection_id: request.connection_id,
        callback_url: request.callback_url,
    };
    let fields = [
        ("to", Some(request.to)),
        ("cc", request.cc),
        ("bcc", request.bcc),
        ("subject", Some(request.subject)),
        ("body", Some(request.body)),
        ("reference_context", request.reference_context),
    ];
    let parameters: Map<String, Value> =
        fields.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?))).collect();
    let call = FLOW.run(&Ctx::new(), &GmailTool, component, &envelope, parameters).await?;
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
