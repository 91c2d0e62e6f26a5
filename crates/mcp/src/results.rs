//! The results every part of the endpoint answers with: an answer or a refusal as an MCP tool
//! result, and a failure that is nobody's fault as JSON-RPC's internal error. It uses none of
//! the endpoint's other parts but `jsonrpc`, so all of them can use it.

use gatehouse_domain::ApiError;
use gatehouse_lifecycle::FollowUp;
use serde::Serialize;
use serde_json::{Value, json};

use crate::jsonrpc::{INTERNAL_ERROR, RpcError};

/// A method's result, and the work the operation it ran goes on with once that result is out.
pub type MethodResult = (Value, Option<FollowUp>);

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

/// A refusal as a tool result the agent can speak: the route's code and sentence.
pub fn refusal(error: &ApiError) -> Value {
    gatehouse_platform::log_error(error);
    tool_result(error, true)
}

/// A failure that is neither the client's nor a tool's (the registry could not be read, say):
/// JSON-RPC's internal error, with the route's own sentence.
pub fn internal(error: ApiError) -> RpcError {
    gatehouse_platform::log_error(&error);
    RpcError::new(INTERNAL_ERROR, error.message)
}
