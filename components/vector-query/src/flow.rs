//! `POST /query-vector-db`: the gated direct flow of SPEC §7. One request records the call,
//! which is already confirmed (the agent read the query back to the caller first), and walks
//! it through four gates:
//!
//! 1. QUERYING: a progress callback; anything but the relay's "continue" cancels (fail closed).
//! 2. EXECUTE: embed the query and search; from here on a cancel is too late.
//! 3. STORE_CONTEXT: the results become the session's `last_query_results`.
//! 4. COMPLETED: the completion callback, with `context_available` and `context_key`.

use gatehouse_domain::contract::Operation;
use gatehouse_domain::{ApiError, Status};
use gatehouse_http::{Component, Method, Reply, Request};
use gatehouse_lifecycle::gated::{self, FlowFields, GatedFlow, Passage};
use gatehouse_store::ToolCall;
use gatehouse_tool::Tool;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::tool::VectorQuery;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectRequest {
    session_id: String,
    #[serde(default)]
    intent_id: Option<String>,
    #[serde(default)]
    connection_id: Option<String>,
    callback_url: String,
    /// Checked by the tool, which names the field of every problem (a 422, not a 400).
    #[serde(default)]
    user_query: Option<Value>,
    #[serde(default)]
    structured_query: Option<Value>,
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
        let fields = [("user_query", &self.user_query), ("structured_query", &self.structured_query)];
        fields.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value.clone()?))).collect()
    }
}

pub async fn query_vector_db(component: Component, req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Post)?;
    let request: DirectRequest = gatehouse_http::read_json(&req)?;
    let mut flow = gated::start(&VectorQuery, component, &request.flow(), request.parameters())?;
    let call = run(&mut flow).await?;
    Ok(gatehouse_http::json_response(200, &answer(&call)).into())
}

/// Walks the gates; the call as the flow left it.
async fn run(flow: &mut GatedFlow) -> Result<ToolCall, ApiError> {
    if let Passage::Stopped(call) = flow.gate("QUERYING", Operation::Execute, "Searching the documents.", false).await?
    {
        return Ok(*call);
    }
    if let Passage::Stopped(call) = flow.begin_side_effect()? {
        return Ok(*call);
    }
    // EXECUTE and STORE_CONTEXT: the tool's execute searches, then stores the results.
    let outcome = flow.run(Operation::Execute, VectorQuery.execute(&flow.tool_request())).await;
    flow.finish(outcome).await
}

/// `{success, tool_call_id, status, message, summary, metrics, documents, context_key}`; the
/// search's fields are present only when it completed.
fn answer(call: &ToolCall) -> Value {
    let mut answer = json!({
        "success": call.status == Status::Completed,
        "tool_call_id": call.tool_call_id,
        "status": call.status,
        "message": call.voice_response,
    });
    if call.status == Status::Completed
        && let Some(Value::Object(result)) = &call.result
    {
        for field in ["summary", "metrics", "documents", "context_key"] {
            answer[field] = result.get(field).cloned().unwrap_or(Value::Null);
        }
    }
    answer
}
