//! `POST /execute-gmail`: the gated direct flow of SPEC §7. One request records the call and
//! walks it through four gates; the relay must say "continue" at the first two.
//!
//! 1. PREPARING: progress, cancellable.
//! 2. READY_TO_SEND: the draft exists, and the relay confirms with the caller.
//! 3. Send.
//! 4. COMPLETED: the completion callback.

use gatehouse_domain::contract::Operation;
use gatehouse_domain::{ApiError, Status};
use gatehouse_http::{Component, Method, Reply, Request};
use gatehouse_lifecycle::gated::{self, FlowFields, GatedFlow, Passage};
use gatehouse_store::ToolCall;
use gatehouse_tool::Tool;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::tool::GmailTool;

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

impl DirectRequest {
    fn flow(&self) -> FlowFields {
        FlowFields {
            session_id: self.session_id.clone(),
            intent_id: self.intent_id.clone(),
            connection_id: self.connection_id.clone(),
            callback_url: self.callback_url.clone(),
        }
    }

    fn parameters(&self) -> Map<String, Value> {
        let fields = [
            ("to", Some(&self.to)),
            ("cc", self.cc.as_ref()),
            ("bcc", self.bcc.as_ref()),
            ("subject", Some(&self.subject)),
            ("body", Some(&self.body)),
            ("reference_context", self.reference_context.as_ref()),
        ];
        fields.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?.clone()))).collect()
    }
}

pub async fn execute_gmail(component: Component, req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Post)?;
    let request: DirectRequest = gatehouse_http::read_json(&req)?;
    let mut flow = gated::start(&GmailTool, component, &request.flow(), request.parameters())?;
    let call = run(&GmailTool, &mut flow).await?;
    Ok(gatehouse_http::json_response(200, &answer(&call)).into())
}

/// Walks the gates; the call as the flow left it.
async fn run(tool: &GmailTool, flow: &mut GatedFlow) -> Result<ToolCall, ApiError> {
    if let Passage::Stopped(call) = flow.gate("PREPARING", Operation::Prepare, "Preparing your email.", false).await? {
        return Ok(*call);
    }
    let checkpoint = match flow.run(Operation::Prepare, tool.prepare(&flow.tool_request())).await {
        Ok(Some(checkpoint)) => checkpoint,
        Ok(None) => return Err(ApiError::internal().with_detail("send_email prepared no draft")),
        Err(failure) => return flow.finish(Err(failure)).await,
    };
    if let Passage::Stopped(call) = flow.prepared(&checkpoint)? {
        return Ok(*call);
    }
    if let Passage::Stopped(call) = flow.gate("READY_TO_SEND", Operation::Execute, &checkpoint.message, true).await? {
        return Ok(*call);
    }
    if let Passage::Stopped(call) = flow.begin_side_effect()? {
        return Ok(*call);
    }
    let outcome = flow.run(Operation::Execute, tool.execute(&flow.tool_request())).await;
    flow.finish(outcome).await
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
