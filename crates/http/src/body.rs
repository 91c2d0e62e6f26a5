use gatehouse_domain::ApiError;
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use spin_sdk::http::Request;

/// The default request body cap. Every request in the API is a small JSON document; the
/// cap keeps a hostile or broken client from making a component buffer megabytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Parses a required JSON body.
pub fn read_json<T: DeserializeOwned>(req: &Request) -> Result<T, ApiError> {
    read_optional_json(req)?
        .ok_or_else(|| ApiError::invalid_input("The request body is empty, but a JSON object is required."))
}

/// Parses a JSON body that the client may leave out entirely (e.g. `{reason?}` on cancel).
pub fn read_optional_json<T: DeserializeOwned>(req: &Request) -> Result<Option<T>, ApiError> {
    let body = req.body();
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    require_json_content_type(req)?;
    serde_json::from_slice(body).map(Some).map_err(describe_json_error)
}

/// A missing Content-Type is tolerated because some relays' HTTP clients omit it, and
/// the body is still parsed strictly as JSON; a declared non-JSON type is refused.
fn require_json_content_type(req: &Request) -> Result<(), ApiError> {
    let Some(value) = req.header("content-type") else {
        return Ok(());
    };
    let media_type = value.as_str().and_then(|v| v.split(';').next()).map(str::trim);
    match media_type {
        Some(t) if t.eq_ignore_ascii_case("application/json") => Ok(()),
        Some(t) if t.to_ascii_lowercase().ends_with("+json") => Ok(()),
        _ => Err(ApiError::unsupported_media_type()),
    }
}

/// Reads a JSON value that arrived inside another document (an MCP tool's arguments) as `T`,
/// with the same errors as a request body.
pub fn from_json_value<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(describe_json_error)
}

fn describe_json_error(error: serde_json::Error) -> ApiError {
    match error.classify() {
        // Well-formed JSON of the wrong shape: serde's message names the field and the
        // expectation, which is exactly what the client needs to fix its request.
        Category::Data => {
            ApiError::invalid_input(format!("The request body is not what this endpoint expects: {error}."))
        }
        Category::Syntax | Category::Eof | Category::Io => {
            ApiError::invalid_input("The request body is not valid JSON.").with_detail(error.to_string())
        }
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
}
