use gatehouse_domain::ApiError;
use spin_sdk::http::{Method, Request};

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
    fn other_methods_get_a_405_naming_the_allowed_one() {
        assert!(require_method(&request(Method::Get), Method::Get).is_ok());
        let error = require_method(&request(Method::Post), Method::Get).err();
        assert_eq!(error.as_ref().map(|e| e.code), Some(ErrorCode::MethodNotAllowed));
        assert_eq!(error.and_then(|e| e.allow).as_deref(), Some("GET"));
    }
}
