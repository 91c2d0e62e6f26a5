use std::time::Duration;

use gatehouse_domain::{ApiError, ToolCallId};
use spin_sdk::http::{Method, Request};

/// A public route's gate: the right method, then the bearer token.
pub fn admit(req: &Request, method: Method) -> Result<(), ApiError> {
    require_method(req, method)?;
    crate::require_bearer(req)
}

/// The `:id` of the route as a tool call id.
pub fn call_id(req: &Request) -> Result<ToolCallId, ApiError> {
    parse_call_id(&path_param(req, "id")?)
}

/// A tool call id the client gave. A malformed one cannot name a call: a 404, like an unknown one.
pub fn parse_call_id(raw: &str) -> Result<ToolCallId, ApiError> {
    ToolCallId::parse(raw).map_err(|_| ApiError::not_found("No tool call has that id."))
}

/// The `Prefer: wait=N` of the request, if any (RFC 7240).
pub fn prefer_wait(req: &Request) -> Option<Duration> {
    header(req, "prefer").and_then(gatehouse_domain::wait_preference)
}

/// The value of a `:name` segment of the route, which Spin passes in the
/// `spin-path-match-<name>` header.
pub fn path_param(req: &Request, name: &str) -> Result<String, ApiError> {
    let header = format!("spin-path-match-{name}");
    let value = req
        .header(&header)
        .and_then(|value| value.as_str())
        // Only a manifest whose route lacks `:name` gets here: a deployment bug, not bad input.
        .ok_or_else(|| ApiError::internal().with_detail(format!("route has no :{name} segment")))?;
    Ok(value.to_owned())
}

/// A request header as text.
pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    req.header(name).and_then(|value| value.as_str())
}

/// The decoded value of a query-string parameter.
pub fn query_param(req: &Request, name: &str) -> Option<String> {
    let query = req.query();
    query
        .split('&')
        .filter_map(|pair| pair.split_once('=').or(Some((pair, ""))))
        .find_map(|(key, value)| (percent_decode(key) == name).then(|| percent_decode(value)))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|digits| u8::from_str_radix(digits, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (other, None) => {
                out.push(other);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
        Request::builder()
            .method(method)
            .uri("/voice-tools/context/sess_1")
            .header("spin-path-match-session", "sess_1")
            .build()
    }

    #[test]
    fn reads_path_parameters_from_spin_headers() {
        assert_eq!(path_param(&request(Method::Get), "session").ok().as_deref(), Some("sess_1"));
        let missing = path_param(&request(Method::Get), "id");
        assert_eq!(missing.err().map(|e| e.code), Some(ErrorCode::Internal));
    }

    #[test]
    fn decodes_query_parameters() {
        let req = Request::builder()
            .method(Method::Get)
            .uri("/get-session-context?session_id=s%201&context_key=last+query&x")
            .build();
        assert_eq!(query_param(&req, "session_id").as_deref(), Some("s 1"));
        assert_eq!(query_param(&req, "context_key").as_deref(), Some("last query"));
        assert_eq!(query_param(&req, "x").as_deref(), Some(""));
        assert_eq!(query_param(&req, "missing"), None);
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%e2%82%ac"), "€");
    }

    #[test]
    fn other_methods_get_a_405_naming_the_allowed_one() {
        assert!(require_method(&request(Method::Get), Method::Get).is_ok());
        let error = require_method(&request(Method::Post), Method::Get).err();
        assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::MethodNotAllowed));
        assert_eq!(error.and_then(|e| e.allow).as_deref(), Some("GET"));
    }
}
