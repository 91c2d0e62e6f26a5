//! The JSON-RPC 2.0 envelope MCP messages travel in.

use serde_json::{Value, json};

/// Standard JSON-RPC error codes, as MCP uses them.
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The codes 2026-07-28 defines in the range it reserves (`-32020` to `-32099`).
pub const HEADER_MISMATCH: i64 = rmcp::model::ErrorCode::HEADER_MISMATCH.0 as i64;
pub const MISSING_CLIENT_CAPABILITY: i64 = rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY.0 as i64;
pub const UNSUPPORTED_VERSION: i64 = rmcp::model::ErrorCode::UNSUPPORTED_PROTOCOL_VERSION.0 as i64;
/// This server's own code, outside JSON-RPC's reserved range as the specification asks: the
/// lifecycle refused what a task method asked (a cancel once the side effect has started, say).
/// `data` is the refusal as the REST route gives it.
pub const REFUSED: i64 = -31000;

/// What one POSTed message is.
#[derive(Debug, PartialEq)]
pub enum Message {
    /// A request, which gets a response: its id, method and params.
    Request { id: Value, method: String, params: Value },
    /// A notification, or the client's response to something: no response is owed.
    NoReply,
}

/// A protocol error, answered instead of a result.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    /// The HTTP status the transport answers with: 200 unless the rule says otherwise.
    pub http_status: u16,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), data: None, http_status: 200 }
    }

    pub fn with_data(mut self, data: Value) -> RpcError {
        self.data = Some(data);
        self
    }

    pub fn with_status(mut self, http_status: u16) -> RpcError {
        self.http_status = http_status;
        self
    }
}

/// Classifies a message. The error carries the id to answer it with, if it had a usable one.
pub fn classify(message: Value) -> Result<Message, (Value, RpcError)> {
    let invalid = |id: Value, why: &str| Err((id, RpcError::new(INVALID_REQUEST, why.to_owned())));
    let Value::Object(mut object) = message else {
        return match message {
            Value::Array(_) => invalid(Value::Null, "Batches are not supported; send one message per request."),
            _ => invalid(Value::Null, "A message must be a JSON-RPC 2.0 object."),
        };
    };
    let id = object.remove("id");
    let usable_id = id.clone().filter(|id| id.is_string() || id.is_i64() || id.is_u64());
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(usable_id.unwrap_or(Value::Null), "The jsonrpc member must be \"2.0\".");
    }
    let Some(method) = object.remove("method") else {
        // A response from the client (to a request this server never sends): nothing to answer.
        return if object.contains_key("result") || object.contains_key("error") {
            Ok(Message::NoReply)
        } else {
            invalid(usable_id.unwrap_or(Value::Null), "A message needs a method.")
        };
    };
    let Value::String(method) = method else {
        return invalid(usable_id.unwrap_or(Value::Null), "The method must be a string.");
    };
    let params = object.remove("params").unwrap_or(Value::Null);
    match (id, usable_id) {
        (None, _) => Ok(Message::NoReply),
        (Some(_), Some(id)) => Ok(Message::Request { id, method, params }),
        (Some(_), None) => invalid(Value::Null, "The id must be a string or an integer."),
    }
}

pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub fn error(id: &Value, error: &RpcError) -> Value {
    let mut body = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        body["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_notifications_and_responses() {
        let request = classify(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
        assert_eq!(request, Ok(Message::Request { id: json!(7), method: "tools/list".into(), params: Value::Null }));
        let notification = classify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(notification, Ok(Message::NoReply));
        assert_eq!(classify(json!({"jsonrpc": "2.0", "id": "a", "result": {}})), Ok(Message::NoReply));
    }

    #[test]
    fn malformed_messages_are_invalid_requests() {
        let code = |message: Value| classify(message).err().map(|(id, e)| (id, e.code));
        assert_eq!(code(json!([{"jsonrpc": "2.0", "id": 1, "method": "ping"}])), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code(json!({"id": 1, "method": "ping"})), Some((json!(1), INVALID_REQUEST)));
        assert_eq!(code(json!({"jsonrpc": "2.0", "id": 1})), Some((json!(1), INVALID_REQUEST)));
        assert_eq!(code(json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})), Some((Value::Null, INVALID_REQUEST)));
        assert_eq!(code(json!({"jsonrpc": "2.0", "id": 2, "method": 3})), Some((json!(2), INVALID_REQUEST)));
        assert_eq!(code(json!("ping")), Some((Value::Null, INVALID_REQUEST)));
    }
}
