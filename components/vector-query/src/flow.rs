//! `POST /query-vector-db`: the gated direct flow of SPEC §7. One request records the call,
//! which is already confirmed (the agent read the query back to the caller first), and walks
//! it through four gates:
//!
//! 1. QUERYING: a progress callback; anything but the relay's "continue" cancels (fail closed).
//! 2. EXECUTE: embed the query and search; from here on a cancel is too late.
//! 3. STORE_CONTEXT: the results become the session's `last_query_results`.
//! 4. COMPLETED: the completion callback, with `context_available` and `context_key`.

use gatehouse_domain::Status;
use gatehouse_http::{ApiError, Component, Reply, Request};
use gatehouse_lifecycle::{Ctx, DirectFlow, Envelope, Gate};
use gatehouse_store::ToolCall;
use gatehouse_vector_search::VectorQuery;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// No checkpoint: the search has no irreversible step worth a second confirmation.
const FLOW: DirectFlow =
    DirectFlow { before_work: Gate { name: "QUERYING", progress: "Searching the documents." }, at_checkpoint: None };

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

pub async fn query_vector_db(component: Component, req: Request) -> Result<Reply, ApiError> {
    let request: DirectRequest = gatehouse_http::read_json(&req)?;
    let envelope = Envelope {
        session_id: request.session_id,
        intent_id: request.intent_id,
        connection_id: request.connection_id,
        callback_url: request.callback_url,
    };
    let fields = [("user_query", request.user_query), ("structured_query", request.structured_query)];
    let parameters: Map<String, Value> =
        fields.into_iter().filter_map(|(name, value)| Some((name.to_owned(), value?))).collect();
    let call = FLOW.run(&Ctx::new(), &VectorQuery, component, &envelope, parameters).await?;
    Ok(gatehouse_rest::ok(&answer(&call)))
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
