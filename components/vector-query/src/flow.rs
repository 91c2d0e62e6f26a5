//! `POST /query-vector-db`: a gated direct flow (docs/architecture.md, "Direct flows"). One
//! request records the call, which is already confirmed (the agent read the query back to the
//! caller first), and walks it through four gates:
//!
//! 1. QUERYING: a progress callback; anything but the relay's "continue" cancels (fail closed).
//! 2. EXECUTE: embed the query and search; from here on a cancel is too late.
//! 3. STORE_CONTEXT: the results become the session's `last_query_results`.
//! 4. COMPLETED: the completion callback, with `context_available` and `context_key`.

use gatehouse_domain::Status;
use gatehouse_http::{ApiError, Component, Params, Reply, Request};
use gatehouse_lifecycle::{DirectFlow, Gate};
use gatehouse_store::ToolCall;
use gatehouse_vector_search::VectorQuery;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// No checkpoint: the search has no irreversible step worth a second confirmation.
const FLOW: DirectFlow =
    DirectFlow { before_work: Gate { name: "QUERYING", progress: "Searching the documents." }, at_checkpoint: None };

/// The tool's own fields of the request, checked by the tool, which names the field of every
/// problem (a 422, not a 400); absent ones are left out of the parameters.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct QueryFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_query: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    structured_query: Option<Value>,
}

pub async fn query_vector_db(component: Component, req: Request, params: Params) -> Result<Reply, ApiError> {
    let (envelope, parameters) = gatehouse_rest::direct_request::<QueryFields>(&req)?;
    let call = FLOW.run(&gatehouse_rest::ctx(&params)?, &VectorQuery, component, &envelope, parameters).await?;
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
