use gatehouse_domain::{ApiError, ErrorCode};
use serde::Serialize;
use spin_sdk::http::Response;

pub use gatehouse_domain::RETRY_AFTER_SECONDS;

/// A JSON response. Serializing our own types cannot realistically fail, but if it ever
/// does the client still gets a well-formed 500 rather than a broken body.
pub fn json_response(status: u16, body: &impl Serialize) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => json_bytes(status, bytes),
        Err(e) => error_response(&ApiError::internal().with_detail(format!("serializing a response: {e}"))),
    }
}

/// The one place an `ApiError` becomes an HTTP response.
pub fn error_response(error: &ApiError) -> Response {
    // A static fallback: the error model is plain data, so this branch is unreachable in practice.
    let bytes = serde_json::to_vec(error).unwrap_or_else(|_| {
        br#"{"error":"Something went wrong on our side. Please try again.","code":"internal"}"#.to_vec()
    });
    let mut response = json_bytes(error.http_status(), bytes);
    match error.code {
        // RFC 6750: tell the client which scheme to use, nothing about why it failed.
        ErrorCode::Unauthorized => response.set_header("www-authenticate", "Bearer"),
        // RFC 6750, section 3.1: the scope the key lacks.
        ErrorCode::Forbidden => {
            if let Some(scope) = error.required_scope {
                response
                    .set_header("www-authenticate", format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\""));
            }
        }
        _ => {}
    }
    if let Some(allow) = &error.allow {
        response.set_header("allow", allow);
    }
    if let Some(seconds) = error.retry_after_seconds {
        response.set_header("retry-after", seconds.to_string());
    }
    response
}

/// Every response a component builds: a 503 or a 429 says when to try again
/// (`gatehouse_domain::retry_after`), unless the error names a wait of its own.
fn json_bytes(status: u16, bytes: Vec<u8>) -> Response {
    let mut response =
        Response::builder().status(status).header("content-type", "application/json").body(bytes).build();
    if let Some(seconds) = gatehouse_domain::retry_after(status) {
        response.set_header("retry-after", seconds);
    }
    response
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::Status;

    use super::*;

    fn header(response: &Response, name: &str) -> Option<String> {
        response.header(name).and_then(|v| v.as_str()).map(str::to_owned)
    }

    fn body(response: &Response) -> serde_json::Value {
        serde_json::from_slice(response.body()).unwrap_or_default()
    }

    #[test]
    fn errors_become_flat_json_with_their_status() {
        let error = ApiError::new(ErrorCode::InvalidState, "Cannot confirm non-pending tool call")
            .with_call_status(Status::Completed);
        let response = error_response(&error);
        assert_eq!(*response.status(), 409);
        assert_eq!(header(&response, "content-type").as_deref(), Some("application/json"));
        assert_eq!(
            body(&response),
            serde_json::json!({"error": "Cannot confirm non-pending tool call", "code": "invalid_state", "status": "COMPLETED"})
        );
    }

    #[test]
    fn database_outages_ask_clients_to_retry() {
        let response = error_response(&ApiError::database_unavailable().with_detail("host=db password=secret"));
        assert_eq!(*response.status(), 503);
        assert_eq!(header(&response, "retry-after").as_deref(), Some(RETRY_AFTER_SECONDS));
        assert!(!String::from_utf8_lossy(response.body()).contains("secret"));
    }

    #[test]
    fn every_503_and_429_says_when_to_try_again() {
        let cases = [
            (ApiError::new(ErrorCode::DeadlineExceeded, "stopped"), 503, RETRY_AFTER_SECONDS.to_owned()),
            (ApiError::new(ErrorCode::TooManyOpenCalls, "settle some first"), 429, RETRY_AFTER_SECONDS.to_owned()),
            (ApiError::new(ErrorCode::RateLimited, "slow down").with_retry_after(7), 429, "7".to_owned()),
        ];
        for (error, status, seconds) in cases {
            let response = error_response(&error);
            assert_eq!(*response.status(), status, "{error:?}");
            assert_eq!(header(&response, "retry-after"), Some(seconds), "{error:?}");
        }
        let degraded = json_response(503, &serde_json::json!({"status": "degraded"}));
        assert_eq!(header(&degraded, "retry-after").as_deref(), Some(RETRY_AFTER_SECONDS));
        assert_eq!(header(&error_response(&ApiError::internal()), "retry-after"), None, "a 500 names no wait");
    }

    #[test]
    fn auth_and_method_errors_carry_their_headers() {
        let response = error_response(&ApiError::unauthorized());
        assert_eq!(*response.status(), 401);
        assert_eq!(header(&response, "www-authenticate").as_deref(), Some("Bearer"));
        let response = error_response(&ApiError::method_not_allowed("GET"));
        assert_eq!(*response.status(), 405);
        assert_eq!(header(&response, "allow").as_deref(), Some("GET"));
        let response = error_response(&ApiError::insufficient_scope(gatehouse_domain::keys::Scope::ToolsRead));
        assert_eq!(*response.status(), 403);
        let challenge = r#"Bearer error="insufficient_scope", scope="tools:read""#;
        assert_eq!(header(&response, "www-authenticate").as_deref(), Some(challenge));
        assert_eq!(body(&response)["required_scope"], "tools:read");
    }

    #[test]
    fn json_responses_serialize_the_body() {
        let response = json_response(201, &serde_json::json!({"ok": true}));
        assert_eq!(*response.status(), 201);
        assert_eq!(body(&response), serde_json::json!({"ok": true}));
    }
}
