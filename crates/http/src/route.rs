use std::time::Duration;

use gatehouse_domain::{ApiError, ToolCallId};
use spin_sdk::http::{Method, Request};

/// A tool call id the client gave. A malformed one cannot name a call: a 404, like an unknown one.
pub fn parse_call_id(raw: &str) -> Result<ToolCallId, ApiError> {
    ToolCallId::parse(raw).map_err(|_| ApiError::not_found("No tool call has that id."))
}

/// The `Prefer: wait=N` of the request, if any (RFC 7240).
pub fn prefer_wait(req: &Request) -> Option<Duration> {
    header(req, "prefer").and_then(gatehouse_domain::wait_preference)
}

/// The value of a `:name` segment of the route, percent-decoded as UTF-8: `raw` as Spin
/// passed it, in the `spin-path-match-<name>` header (see [`crate::Params`]).
///
/// Spin passes the segment as it was on the wire, so a session called `call 42` arrives as
/// `call%2042`. A `+` in a path is a plus (only a query string uses it for a space). A
/// malformed escape is a 400, never a lookup of the raw text.
pub(crate) fn decode_path_param(name: &str, raw: Option<&str>) -> Result<String, ApiError> {
    // Only a handler asking for a segment its route lacks gets here: a bug, not bad input.
    let raw = raw.ok_or_else(|| ApiError::internal().with_detail(format!("route has no :{name} segment")))?;
    percent_decode(raw, Plus::Literal).map_err(|problem| {
        ApiError::invalid_input(format!("The :{name} part of the path is not valid percent-encoding."))
            .with_field(name, problem)
    })
}

/// The route pattern the request matched, as written in the manifest
/// (`/voice-tools/tools/:name/stats`), from Spin's `spin-matched-route` header; `/...` for a
/// request that came by service chaining. [`crate::Router`] dispatches on this, not on the
/// path: `/get-session-context/` (a trailing slash) matches the route `/get-session-context`
/// but is not that path.
pub(crate) fn matched_route(req: &Request) -> Option<&str> {
    header(req, "spin-matched-route")
}

/// The route Spin reports for a request that reached a private component by service chaining.
pub const CHAINED_ROUTE: &str = "/...";

/// A request header as text; a value that is not UTF-8 reads as absent. For a header that must
/// not be silently dropped (an idempotency key), use [`header_text`].
pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.header(name).and_then(|value| value.as_str())
}

/// A request header whose value the request depends on: absent, text, or a 400 naming it
/// when its bytes are not UTF-8 (ignoring it would act as if the client had not sent it).
pub fn header_text<'a>(req: &'a Request, name: &str) -> Result<Option<&'a str>, ApiError> {
    match req.header(name) {
        None => Ok(None),
        Some(value) => value.as_str().map(Some).ok_or_else(|| {
            ApiError::invalid_input(format!("The {name} header must be UTF-8 text."))
                .with_field(name, "is not UTF-8 text")
        }),
    }
}

/// The decoded value of a query-string parameter (`+` is a space, as in a form), or `None`
/// when the query does not have it. A malformed escape is a 400 naming the parameter.
pub fn query_param(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    let query = req.query();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // A key that does not decode cannot be the one asked for; its own value is not read.
        if percent_decode(key, Plus::Space).is_ok_and(|key| key == name) {
            return percent_decode(value, Plus::Space).map(Some).map_err(|problem| {
                ApiError::invalid_input(format!("The query parameter {name} is not valid percent-encoding."))
                    .with_field(name, problem)
            });
        }
    }
    Ok(None)
}

/// What a `+` means: a literal in a path, a space in a query string (HTML forms).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plus {
    Literal,
    Space,
}

/// Decodes `%XX` escapes strictly: every `%` starts two hex digits, and the bytes are UTF-8.
/// The error says which rule was broken, for the answer's `fields`.
fn percent_decode(text: &str, plus: Plus) -> Result<String, &'static str> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let byte = text
                    .get(i + 1..i + 3)
                    .filter(|digits| digits.bytes().all(|b| b.is_ascii_hexdigit()))
                    .and_then(|digits| u8::from_str_radix(digits, 16).ok())
                    .ok_or("has a % that is not followed by two hexadecimal digits")?;
                out.push(byte);
                i += 3;
            }
            b'+' if plus == Plus::Space => {
                out.push(b' ');
                i += 1;
            }
            other => {
                out.push(other);
                i += 1;
            }
        }
    }
    let text = String::from_utf8(out).map_err(|_| "does not decode to UTF-8 text")?;
    // PostgreSQL holds no NUL in text: refused here rather than by the database, as a 500.
    if text.contains('\0') {
        return Err("holds a NUL character (%00)");
    }
    Ok(text)
}

/// Rejects any other method with a 405 whose `Allow` header names the accepted one.
pub fn require_method(req: &Request, allowed: Method) -> Result<(), ApiError> {
    if *req.method() == allowed {
        return Ok(());
    }
    Err(ApiError::method_not_allowed(allowed.to_string()))
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::ErrorCode;

    use super::*;

    fn request(method: Method) -> Request {
        Request::builder().method(method).uri("/voice-tools/context/sess_1").build()
    }

    #[test]
    fn a_missing_path_parameter_is_our_bug() {
        assert_eq!(decode_path_param("session", Some("sess_1")).ok().as_deref(), Some("sess_1"));
        let missing = decode_path_param("id", None);
        assert_eq!(missing.err().map(|e| e.code), Some(ErrorCode::Internal));
    }

    #[test]
    fn decodes_query_parameters() {
        let req = Request::builder()
            .method(Method::Get)
            .uri("/get-session-context?session_id=s%201&context_key=last+query&x&bad=100%25%")
            .build();
        assert_eq!(query_param(&req, "session_id").ok().flatten().as_deref(), Some("s 1"));
        assert_eq!(query_param(&req, "context_key").ok().flatten().as_deref(), Some("last query"));
        assert_eq!(query_param(&req, "x").ok().flatten().as_deref(), Some(""));
        assert_eq!(query_param(&req, "missing").ok(), Some(None));
        assert_eq!(query_param(&req, "bad").err().map(|e| e.code), Some(ErrorCode::InvalidInput));
        assert_eq!(percent_decode("%e2%82%ac", Plus::Space), Ok("€".to_owned()));
    }

    #[test]
    fn decodes_path_parameters() {
        for (raw, decoded) in [
            ("call%2042", "call 42"),
            ("caf%C3%A9-7", "café-7"),
            ("a%2Fb", "a/b"),
            ("x%3Fy", "x?y"),
            ("plus+sign", "plus+sign"),
            ("plus%2Bsign", "plus+sign"),
            ("send%5femail", "send_email"),
        ] {
            assert_eq!(decode_path_param("session", Some(raw)).ok().as_deref(), Some(decoded), "{raw}");
        }
    }

    #[test]
    fn malformed_escapes_in_a_path_are_refused() {
        for raw in ["%zz", "abc%4", "%", "%ff", "%C3", "a%%20", "a%00b"] {
            let error = decode_path_param("session", Some(raw)).err();
            assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::InvalidInput), "{raw}");
        }
    }

    #[test]
    fn other_methods_get_a_405_naming_the_allowed_one() {
        assert!(require_method(&request(Method::Get), Method::Get).is_ok());
        let error = require_method(&request(Method::Post), Method::Get).err();
        assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::MethodNotAllowed));
        assert_eq!(error.and_then(|e| e.allow).as_deref(), Some("GET"));
    }
}
