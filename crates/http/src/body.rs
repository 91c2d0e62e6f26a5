//! The one place a request body is read, for every route: REST, MCP, the direct flows and
//! the tool contract.
//!
//! Every body in the API is a JSON object. The shape is checked before any field is looked
//! at, because serde maps a JSON array onto a struct's fields by position: without the check,
//! `[]` would deserialize as a request whose fields are all absent, and be acted on.

use gatehouse_domain::ApiError;
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use serde_json::{Map, Value};
use spin_sdk::http::Request;

/// The default request body cap. Every request in the API is a small JSON document; the
/// cap keeps a hostile or broken client from making a component buffer megabytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Why a body was refused. Routes answer it as 400 `invalid_input` (415 for a declared
/// non-JSON media type); the MCP endpoint maps it onto JSON-RPC's own codes.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("The request body is empty, but a JSON object is required.")]
    Empty,
    #[error("The request body must be a JSON object, not {0}.")]
    NotAnObject(&'static str),
    #[error("The request body is not valid JSON.")]
    Syntax(#[source] serde_json::Error),
    #[error("The request body is not what this endpoint expects: {0}.")]
    Shape(#[source] serde_json::Error),
    #[error("This endpoint takes no request body (an empty body or {{}} only).")]
    Unexpected,
    #[error("The request body must be JSON (Content-Type: application/json).")]
    MediaType,
    #[error("The request body holds a NUL character (\\u0000), which no text here may contain.")]
    Nul,
}

impl From<BodyError> for ApiError {
    fn from(error: BodyError) -> ApiError {
        match error {
            BodyError::MediaType => ApiError::unsupported_media_type(),
            BodyError::Syntax(ref cause) => ApiError::invalid_input(error.to_string()).with_detail(cause.to_string()),
            other => ApiError::invalid_input(other.to_string()),
        }
    }
}

/// Parses a required JSON object body.
pub fn read_json<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    Ok(parse_body(req)?.ok_or(BodyError::Empty)?)
}

/// Parses a JSON object body that the client may leave out entirely (e.g. `{reason?}` on cancel).
pub fn read_optional_json<T: DeserializeOwned>(req: &Request) -> Result<Option<T>, ApiError> {
    Ok(parse_body(req)?)
}

/// For a route that takes no body: an empty body or `{}` only, so that an instruction sent
/// to the wrong route is refused rather than silently ignored.
pub fn require_no_body(req: &Request) -> Result<(), ApiError> {
    match parse_body::<Map<String, Value>>(req)? {
        Some(object) if !object.is_empty() => Err(BodyError::Unexpected.into()),
        _ => Ok(()),
    }
}

/// The body as a `T`, `None` when it is empty (or only whitespace), or why it was refused.
pub fn parse_body<T: DeserializeOwned>(req: &Request) -> Result<Option<T>, BodyError> {
    let body = req.body();
    let Some(first) = body.iter().find(|byte| !byte.is_ascii_whitespace()) else {
        return Ok(None);
    };
    require_json_content_type(req)?;
    if *first != b'{' {
        return Err(not_an_object(body));
    }
    if may_hold_nul(body) {
        let value: Value = serde_json::from_slice(body).map_err(classify)?;
        return from_value_without_nul(value).map(Some);
    }
    serde_json::from_slice(body).map(Some).map_err(classify)
}

/// Whether the text has a `\u0000` escape: the only way a JSON document can hold a NUL, and
/// one PostgreSQL refuses in text and in `jsonb` alike. Checked on the bytes first, so a
/// body without one is parsed once; one with it is parsed as a value and looked at closely
/// (an escaped backslash followed by `u0000` is no NUL).
fn may_hold_nul(body: &[u8]) -> bool {
    body.windows(6).any(|w| w[0] == b'\\' && w[1] == b'u' && w[2..].iter().all(|b| *b == b'0'))
}

fn from_value_without_nul<T: DeserializeOwned>(value: Value) -> Result<T, BodyError> {
    if holds_nul(&value) {
        return Err(BodyError::Nul);
    }
    serde_json::from_value(value).map_err(classify)
}

/// Whether any string of `value`, key or value, at any depth, holds a NUL.
fn holds_nul(value: &Value) -> bool {
    match value {
        Value::String(text) => text.contains('\0'),
        Value::Array(items) => items.iter().any(holds_nul),
        Value::Object(map) => map.iter().any(|(key, item)| key.contains('\0') || holds_nul(item)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// A JSON value that arrived inside another document (an MCP tool's arguments) as `T`, with
/// the same rules and errors as a request body.
pub fn from_json_value<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    if !value.is_object() {
        return Err(BodyError::NotAnObject(kind(&value)).into());
    }
    Ok(from_value_without_nul(value)?)
}

/// A missing Content-Type is tolerated because some relays' HTTP clients omit it, and
/// the body is still parsed strictly as JSON; a declared non-JSON type is refused.
fn require_json_content_type(req: &Request) -> Result<(), BodyError> {
    let Some(value) = req.header("content-type") else {
        return Ok(());
    };
    let media_type = value.as_str().and_then(|v| v.split(';').next()).map(str::trim);
    match media_type {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        Some(t) if t.to_ascii_lowercase().ends_with("+json") => Ok(()),
        _ => Err(BodyError::MediaType),
    }
}

/// A body that does not start with `{`: say what it is, if it is JSON at all. Only on the
/// refusal path, so parsing it a second way costs a well-formed request nothing.
fn not_an_object(body: &[u8]) -> BodyError {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) => BodyError::NotAnObject(kind(&value)),
        Err(error) => BodyError::Syntax(error),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn classify(error: serde_json::Error) -> BodyError {
    match error.classify() {
        // Well-formed JSON of the wrong shape: serde's message names the field and the
        // expectation, which is exactly what the client needs to fix its request.
        Category::Data => BodyError::Shape(error),
        Category::Syntax | Category::Eof | Category::Io => BodyError::Syntax(error),
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::ErrorCode;
    use serde::Deserialize;
    use spin_sdk::http::Method;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    struct Cancel {
        reason: Option<String>,
    }

    fn request(content_type: Option<&str>, body: &str) -> Request {
        let mut builder = Request::builder();
        builder.method(Method::Post).uri("/x").body(body.to_owned());
        if let Some(content_type) = content_type {
            builder.header("content-type", content_type);
        }
        builder.build()
    }

    fn code<T>(result: Result<T, ApiError>) -> Option<ErrorCode> {
        result.err().map(|e| e.code)
    }

    #[test]
    fn parses_json_bodies() {
        for content_type in [
            Some("application/json"),
            Some("Application/JSON; charset=utf-8"),
            Some("application/merge-patch+json"),
            None,
        ] {
            let parsed: Result<Cancel, _> = read_json(&request(content_type, r#"{"reason":"changed my mind"}"#));
            assert_eq!(parsed.ok(), Some(Cancel { reason: Some("changed my mind".into()) }), "{content_type:?}");
        }
    }

    #[test]
    fn refuses_declared_non_json_bodies() {
        let parsed: Result<Cancel, _> = read_json(&request(Some("text/plain"), r#"{"reason":"x"}"#));
        assert_eq!(code(parsed), Some(ErrorCode::UnsupportedMediaType));
        let parsed: Result<Cancel, _> = read_json(&request(Some("application/x-www-form-urlencoded"), "reason=x"));
        assert_eq!(code(parsed), Some(ErrorCode::UnsupportedMediaType));
    }

    #[test]
    fn malformed_or_misshapen_json_is_invalid_input() {
        let parsed: Result<Cancel, _> = read_json(&request(Some("application/json"), "{not json"));
        assert_eq!(code(parsed), Some(ErrorCode::InvalidInput));
        let parsed: Result<Cancel, _> = read_json(&request(Some("application/json"), r#"{"reason": 5}"#));
        let error = parsed.err();
        assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::InvalidInput));
        assert!(error.is_some_and(|e| e.message.contains("invalid type")));
    }

    #[test]
    fn empty_bodies_are_absent_not_malformed() {
        let parsed: Result<Option<Cancel>, _> = read_optional_json(&request(None, "  \n"));
        assert_eq!(parsed.ok(), Some(None));
        let parsed: Result<Cancel, _> = read_json(&request(Some("application/json"), ""));
        assert_eq!(code(parsed), Some(ErrorCode::InvalidInput));
    }

    /// serde maps a sequence onto a struct's fields by position: `[]` must not become a
    /// request with every field absent, nor `["x"]` one whose first field is "x".
    #[test]
    fn only_an_object_is_a_body() {
        for body in ["[]", r#"["changed my mind"]"#, r#""x""#, "1", "true", "null", " [ {} ] "] {
            let parsed: Result<Option<Cancel>, _> = read_optional_json(&request(Some("application/json"), body));
            let error = parsed.err();
            assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::InvalidInput), "{body}");
            assert!(error.is_some_and(|e| e.message.contains("must be a JSON object")), "{body}");
        }
        let parsed: Result<Cancel, _> = read_json(&request(None, "[1, 2"));
        assert!(parsed.err().is_some_and(|e| e.message.contains("not valid JSON")));
    }

    #[test]
    fn routes_without_a_body_take_nothing_or_an_empty_object() {
        for body in ["", "  ", "{}", " { } "] {
            assert!(require_no_body(&request(None, body)).is_ok(), "{body:?}");
        }
        for body in [r#"{"action":"proceed"}"#, "[]", "0", "{"] {
            assert_eq!(code(require_no_body(&request(None, body))), Some(ErrorCode::InvalidInput), "{body:?}");
        }
    }

    /// PostgreSQL holds no NUL in text or `jsonb`: a body with one is a 400 before any field
    /// is read, wherever the NUL sits, and an escaped backslash before `u0000` is no NUL.
    #[test]
    fn a_nul_anywhere_is_refused_and_a_lookalike_is_not() {
        for body in
            [r#"{"reason": "a\u0000b"}"#, r#"{"reason": "ok", "x": {"deep": ["\u0000"]}}"#, r#"{"k\u0000ey": 1}"#]
        {
            let parsed: Result<Option<Value>, _> = read_optional_json(&request(Some("application/json"), body));
            let error = parsed.err();
            assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::InvalidInput), "{body}");
            assert!(error.is_some_and(|e| e.message.contains("NUL")), "{body}");
        }
        let parsed: Result<Cancel, _> = read_json(&request(None, r#"{"reason": "C:\\u0000 is a path"}"#));
        assert_eq!(parsed.ok(), Some(Cancel { reason: Some("C:\\u0000 is a path".into()) }));
        let embedded: Result<Cancel, _> = from_json_value(serde_json::json!({"reason": "a\u{0}b"}));
        assert_eq!(code(embedded), Some(ErrorCode::InvalidInput));
    }

    #[test]
    fn embedded_documents_follow_the_same_rules() {
        let parsed: Result<Cancel, _> = from_json_value(serde_json::json!(["changed my mind"]));
        assert_eq!(code(parsed), Some(ErrorCode::InvalidInput));
        let parsed: Result<Cancel, _> = from_json_value(serde_json::json!({"reason": "ok"}));
        assert_eq!(parsed.ok(), Some(Cancel { reason: Some("ok".into()) }));
    }
}
