//! An answer the host writes itself, not a guest, as plain data: status, content type and body.
//! `app` turns it into a response; the modules that answer for the host (`well_known`) need not
//! know the application, nor the body type of the wasmtime release in use.
use http::StatusCode;
use serde_json::json;

/// A response the host writes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostAnswer {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: String,
}

impl HostAnswer {
    pub(crate) fn new(status: StatusCode, content_type: &'static str, body: String) -> HostAnswer {
        HostAnswer { status, content_type, body }
    }

    /// An answer in the shape of the API's errors (`{"error": sentence, "code": code}`), so a
    /// client parses one format whether the runner or a component refused.
    pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> HostAnswer {
        HostAnswer::new(status, "application/json", json!({"error": message, "code": code}).to_string())
    }
}
