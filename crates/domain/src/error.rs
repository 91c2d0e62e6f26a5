//! The API error model: every failure a client sees, in one flat shape
//! `{"error": "<sentence>", "code": "<stable code>", ...extra}` (docs/architecture.md,
//! "Errors").

use serde::Serialize;
use thiserror::Error;

use crate::{Status, ToolCallId};

/// A stable, machine-readable error code. Clients branch on this, never on the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    InvalidState,
    Expired,
    InvalidInput,
    ValidationFailed,
    PayloadTooLarge,
    UnsupportedMediaType,
    DatabaseUnavailable,
    Internal,
    UnknownFunction,
    IdempotencyKeyReused,
    CallbackNotAllowed,
    SideEffectStarted,
    ToolUnavailable,
    /// The host stopped a request that outlived its deadline (the runner's `--request-timeout`).
    DeadlineExceeded,
    /// A confirm named a callback URL other than the one the call was created with: a call's
    /// reports go where its creator said.
    CallbackUrlConflict,
    /// The session already holds as many open calls as one session may.
    TooManyOpenCalls,
    /// The client did not send the request's body in the time the host allows.
    RequestTimeout,
    /// The tenant created as many calls in the last second as it may (docs/keys.md, "Limits").
    RateLimited,
    /// A signed hop's request carried no signature, or not one of the recipe's shape
    /// (`crate::signing::Refusal`, docs/architecture.md, "Signed hops").
    SignatureMissing,
    /// A signed hop's timestamp is outside the receiver's window: a stale request or a wrong clock.
    SignatureStale,
    /// A signed hop's MAC does not match the request: another secret, or a changed request.
    SignatureMismatch,
    /// A signed hop's nonce was already spent: a replay.
    SignatureReplayed,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 26] = [
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::InvalidState,
        ErrorCode::Expired,
        ErrorCode::InvalidInput,
        ErrorCode::ValidationFailed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::UnsupportedMediaType,
        ErrorCode::DatabaseUnavailable,
        ErrorCode::Internal,
        ErrorCode::UnknownFunction,
        ErrorCode::IdempotencyKeyReused,
        ErrorCode::CallbackNotAllowed,
        ErrorCode::SideEffectStarted,
        ErrorCode::ToolUnavailable,
        ErrorCode::DeadlineExceeded,
        ErrorCode::CallbackUrlConflict,
        ErrorCode::TooManyOpenCalls,
        ErrorCode::RequestTimeout,
        ErrorCode::RateLimited,
        ErrorCode::SignatureMissing,
        ErrorCode::SignatureStale,
        ErrorCode::SignatureMismatch,
        ErrorCode::SignatureReplayed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::InvalidState => "invalid_state",
            ErrorCode::Expired => "expired",
            ErrorCode::InvalidInput => "invalid_input",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ErrorCode::DatabaseUnavailable => "database_unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::UnknownFunction => "unknown_function",
            ErrorCode::IdempotencyKeyReused => "idempotency_key_reused",
            ErrorCode::CallbackNotAllowed => "callback_not_allowed",
            ErrorCode::SideEffectStarted => "side_effect_started",
            ErrorCode::ToolUnavailable => "tool_unavailable",
            ErrorCode::DeadlineExceeded => "deadline_exceeded",
            ErrorCode::CallbackUrlConflict => "callback_url_conflict",
            ErrorCode::TooManyOpenCalls => "too_many_open_calls",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::SignatureMissing => "signature_missing",
            ErrorCode::SignatureStale => "signature_stale",
            ErrorCode::SignatureMismatch => "signature_mismatch",
            ErrorCode::SignatureReplayed => "signature_replayed",
        }
    }

    /// The HTTP status of this kind of failure (docs/architecture.md, "Errors").
    pub const fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidInput => 400,
            ErrorCode::Unauthorized
            | ErrorCode::SignatureMissing
            | ErrorCode::SignatureStale
            | ErrorCode::SignatureMismatch
            | ErrorCode::SignatureReplayed => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::InvalidState | ErrorCode::SideEffectStarted | ErrorCode::CallbackUrlConflict => 409,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Expired => 410,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::ValidationFailed
            | ErrorCode::UnknownFunction
            | ErrorCode::IdempotencyKeyReused
            | ErrorCode::CallbackNotAllowed => 422,
            ErrorCode::TooManyOpenCalls | ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            // The tool component behind a private route failed or could not be reached.
            ErrorCode::ToolUnavailable => 502,
            ErrorCode::DatabaseUnavailable | ErrorCode::DeadlineExceeded => 503,
        }
    }
}

/// How long a client waits before retrying a 503 or a 429 that names no wait of its own, in
/// seconds: the outages worth retrying (a database restart, a failover, a full pool, a busy
/// model) are short.
pub const RETRY_AFTER_SECONDS: &str = "1";

/// The `Retry-After` an answer with `status` carries when it says nothing more precise: every
/// 503 and every 429, whoever answers it (a component, the runner, the embeddings server), so
/// clients and load balancers back off instead of hammering (docs/architecture.md, "Errors").
pub const fn retry_after(status: u16) -> Option<&'static str> {
    match status {
        429 | 503 => Some(RETRY_AFTER_SECONDS),
        _ => None,
    }
}

/// One problem with one input field, e.g. `{"field": "to", "problem": "is not an email address"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FieldProblem {
    pub field: String,
    pub problem: String,
}

impl FieldProblem {
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { field: field.into(), problem: problem.into() }
    }
}

/// A failed request, as the client will see it.
///
/// `message` is serialized as `error` and must be a sentence a voice agent can say out
/// loud: it never contains secrets, SQL, stack traces or connection strings. Anything
/// only an operator should read goes in `detail`, which is logged and never serialized.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize)]
#[error("{message}")]
pub struct ApiError {
    #[serde(rename = "error")]
    pub message: String,
    pub code: ErrorCode,
    /// The call's current status, when the error is about a call's state.
    #[serde(rename = "status", skip_serializing_if = "Option::is_none")]
    pub call_status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldProblem>,
    /// Why the tool could not be used, on a `tool_unavailable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<crate::contract::ToolFault>,
    /// The scope a 403 `forbidden` needed and the key lacks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_scope: Option<crate::keys::Scope>,
    /// The methods a 405 must list in its `Allow` header.
    #[serde(skip)]
    pub allow: Option<String>,
    /// The seconds a 429 tells the client to wait in its `Retry-After` header.
    #[serde(skip)]
    pub retry_after_seconds: Option<u32>,
    /// Operator-only diagnostics, for the logs.
    #[serde(skip)]
    pub detail: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code,
            call_status: None,
            tool_call_id: None,
            fields: Vec::new(),
            cause: None,
            required_scope: None,
            allow: None,
            retry_after_seconds: None,
            detail: None,
        }
    }

    /// Tells the client to wait this long before trying again (`Retry-After`).
    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        self.retry_after_seconds = Some(seconds);
        self
    }

    pub fn http_status(&self) -> u16 {
        self.code.http_status()
    }

    pub fn with_call_status(mut self, status: Status) -> Self {
        self.call_status = Some(status);
        self
    }

    pub fn with_tool_call_id(mut self, id: ToolCallId) -> Self {
        self.tool_call_id = Some(id);
        self
    }

    pub fn with_field(mut self, field: impl Into<String>, problem: impl Into<String>) -> Self {
        self.fields.push(FieldProblem::new(field, problem));
        self
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// 403: the key is valid but lacks `scope`; the answer names it.
    pub fn insufficient_scope(scope: crate::keys::Scope) -> Self {
        let mut error =
            Self::new(ErrorCode::Forbidden, format!("This key does not have the {scope} scope this needs."));
        error.required_scope = Some(scope);
        error
    }

    pub fn unauthorized() -> Self {
        Self::new(ErrorCode::Unauthorized, "A valid API token is required.")
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::NotFound, message)
    }

    /// `allow` is the value of the `Allow` header, e.g. `"GET"` or `"GET, POST"`.
    pub fn method_not_allowed(allow: impl Into<String>) -> Self {
        let allow = allow.into();
        let mut error = Self::new(ErrorCode::MethodNotAllowed, format!("This address only accepts {allow} requests."));
        error.allow = Some(allow);
        error
    }

    /// 409: the call exists but is not in a state that allows the operation.
    pub fn invalid_state(message: impl Into<String>, id: ToolCallId, current: Status) -> Self {
        Self::new(ErrorCode::InvalidState, message).with_tool_call_id(id).with_call_status(current)
    }

    /// 410: the call timed out before anyone acted on it; it will never run.
    pub fn expired(id: ToolCallId) -> Self {
        Self::new(ErrorCode::Expired, "That request has expired, so nothing was done.")
            .with_tool_call_id(id)
            .with_call_status(Status::Expired)
    }

    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    pub fn validation_failed(message: impl Into<String>, fields: Vec<FieldProblem>) -> Self {
        let mut error = Self::new(ErrorCode::ValidationFailed, message);
        error.fields = fields;
        error
    }

    pub fn payload_too_large(limit_bytes: usize) -> Self {
        Self::new(
            ErrorCode::PayloadTooLarge,
            format!("The request body is larger than the limit of {} KiB.", limit_bytes / 1024),
        )
    }

    pub fn unsupported_media_type() -> Self {
        Self::new(ErrorCode::UnsupportedMediaType, "The request body must be JSON.")
    }

    pub fn database_unavailable() -> Self {
        Self::new(
            ErrorCode::DatabaseUnavailable,
            "The database is unavailable right now. Please try again in a moment.",
        )
    }

    /// 502: the tool could not be used, and why.
    pub fn tool_unavailable(tool: &str, cause: crate::contract::ToolFault) -> Self {
        let mut error = Self::new(
            ErrorCode::ToolUnavailable,
            format!("The {tool} tool is not answering right now. Please try again."),
        );
        error.cause = Some(cause);
        error
    }

    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "Something went wrong on our side. Please try again.")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn to_json(error: &ApiError) -> Value {
        serde_json::to_value(error).unwrap_or(Value::Null)
    }

    fn id() -> ToolCallId {
        ToolCallId::from_random_bytes([0xab; 6])
    }

    #[test]
    fn state_errors_have_the_seed_compatible_flat_shape() {
        let error = ApiError::invalid_state("Cannot confirm non-pending tool call", id(), Status::Completed);
        assert_eq!(
            to_json(&error),
            json!({
                "error": "Cannot confirm non-pending tool call",
                "code": "invalid_state",
                "status": "COMPLETED",
                "tool_call_id": "tc_abababababab",
            })
        );
        assert_eq!(error.http_status(), 409);
    }

    #[test]
    fn optional_extras_are_omitted_when_absent() {
        let error = ApiError::unauthorized();
        assert_eq!(to_json(&error), json!({"error": "A valid API token is required.", "code": "unauthorized"}));
    }

    #[test]
    fn field_problems_serialize_as_a_list() {
        let error = ApiError::validation_failed(
            "Some parameters are not valid.",
            vec![FieldProblem::new("to", "is not an email address")],
        )
        .with_field("subject", "must not contain a line break");
        assert_eq!(
            to_json(&error),
            json!({
                "error": "Some parameters are not valid.",
                "code": "validation_failed",
                "fields": [
                    {"field": "to", "problem": "is not an email address"},
                    {"field": "subject", "problem": "must not contain a line break"},
                ],
            })
        );
        assert_eq!(error.http_status(), 422);
    }

    #[test]
    fn operator_details_and_header_hints_are_never_serialized() {
        let error = ApiError::database_unavailable().with_detail("password=hunter2");
        let text = serde_json::to_string(&error).unwrap_or_default();
        assert!(!text.contains("hunter2"));
        assert!(!text.contains("detail"));
        let error = ApiError::method_not_allowed("GET");
        assert_eq!(error.allow.as_deref(), Some("GET"));
        let mut keys: Vec<String> = match to_json(&error) {
            Value::Object(map) => map.keys().cloned().collect(),
            _ => Vec::new(),
        };
        keys.sort();
        assert_eq!(keys, ["code", "error"]);
    }

    #[test]
    fn codes_map_to_the_spec_http_statuses() {
        let expected = [
            (ErrorCode::Unauthorized, 401),
            (ErrorCode::NotFound, 404),
            (ErrorCode::MethodNotAllowed, 405),
            (ErrorCode::InvalidState, 409),
            (ErrorCode::Forbidden, 403),
            (ErrorCode::Expired, 410),
            (ErrorCode::InvalidInput, 400),
            (ErrorCode::ValidationFailed, 422),
            (ErrorCode::PayloadTooLarge, 413),
            (ErrorCode::UnsupportedMediaType, 415),
            (ErrorCode::DatabaseUnavailable, 503),
            (ErrorCode::Internal, 500),
            (ErrorCode::UnknownFunction, 422),
            (ErrorCode::IdempotencyKeyReused, 422),
            (ErrorCode::CallbackNotAllowed, 422),
            (ErrorCode::SideEffectStarted, 409),
            (ErrorCode::ToolUnavailable, 502),
            (ErrorCode::DeadlineExceeded, 503),
            (ErrorCode::CallbackUrlConflict, 409),
            (ErrorCode::TooManyOpenCalls, 429),
            (ErrorCode::RequestTimeout, 408),
            (ErrorCode::RateLimited, 429),
            (ErrorCode::SignatureMissing, 401),
            (ErrorCode::SignatureStale, 401),
            (ErrorCode::SignatureMismatch, 401),
            (ErrorCode::SignatureReplayed, 401),
        ];
        assert_eq!(expected.len(), ErrorCode::ALL.len());
        for (code, status) in expected {
            assert_eq!(code.http_status(), status, "{code:?}");
        }
    }

    #[test]
    fn serialized_codes_match_as_str() {
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).ok(), Some(Value::from(code.as_str())));
        }
    }

    #[test]
    fn expired_names_the_call_and_its_status() {
        let error = ApiError::expired(id());
        assert_eq!(error.http_status(), 410);
        assert_eq!(to_json(&error)["status"], "EXPIRED");
        assert_eq!(to_json(&error)["tool_call_id"], "tc_abababababab");
    }

    #[test]
    fn display_is_the_spoken_sentence() {
        assert_eq!(ApiError::internal().to_string(), "Something went wrong on our side. Please try again.");
    }
}
