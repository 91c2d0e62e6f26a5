//! The HTTP plumbing every Gatehouse component shares, so that a component is only
//! "parse, call the store, respond".
//!
//! A component looks like this:
//!
//! ```ignore
//! use gatehouse_http::{ApiError, Reply, Request};
//!
//! gatehouse_http::component!(handle);
//!
//! async fn handle(req: Request) -> Result<Reply, ApiError> {
//!     gatehouse_http::require_method(&req, gatehouse_http::Method::Get)?;
//!     gatehouse_http::require_bearer(&req)?;
//!     // ...
//!     Ok(gatehouse_http::json_response(200, &serde_json::json!({"ok": true})).into())
//! }
//! ```

// ApiError is a few pointers wide; it only travels the failure path, where its size
// costs nothing measurable, and boxing it would clutter every handler.
#![allow(clippy::result_large_err)]

mod auth;
mod body;
mod db;
mod outbound;
mod random;
mod response;
mod route;
mod serve;
mod trace;

pub use auth::{require_bearer, require_service_request, service_signature};
pub use body::{
    BodyError, MAX_BODY_BYTES, from_json_value, parse_body, read_json, read_optional_json, require_no_body,
};
pub use db::open_db;
pub use outbound::{Answer, SendFailure, send, sleep, within};
pub use random::{new_token, new_tool_call_id, random_bytes};
pub use response::{RETRY_AFTER_SECONDS, error_response, json_response};
pub use route::{
    CHAINED_ROUTE, admit, call_id, header, matched_route, parse_call_id, path_param, prefer_wait, query_param,
    require_method,
};
pub use serve::{AfterResponse, Reply, log_error, reply_or_error, serve, serve_with_body_limit};
pub use trace::{Component, log_event, log_line, trace_id, traceparent};

pub use gatehouse_domain::{ApiError, ErrorCode};

/// Declares the component's Spin entry point: every request goes through [`serve`] to `handler`,
/// an `async fn(Request) -> Result<Reply, ApiError>`.
#[macro_export]
macro_rules! component {
    ($handler:path) => {
        #[::spin_sdk::http_component]
        async fn entry(req: $crate::IncomingRequest, out: $crate::ResponseOutparam) {
            $crate::serve($crate::this_component!(), req, out, $handler).await
        }
    };
}
pub use spin_sdk::http::{IncomingRequest, Method, Request, Response, ResponseOutparam};
