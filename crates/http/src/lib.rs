//! Serving a Gatehouse component's HTTP requests: the entry point (answer, then continue with
//! the work after the answer), the router with typed parameters and 405s, bodies read
//! strictly, bearer and service auth, and errors as JSON. What a component asks of its host
//! besides its request (the database, outbound calls, randomness, logs) is in
//! `gatehouse-platform`.
//!
//! A component declares its routes, and each handler only does its route's work:
//!
//! ```ignore
//! use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};
//!
//! gatehouse_http::component!(routes);
//!
//! /// As `spin.toml` routes them; the router answers 405 for other methods 401 without a key, 403 without its scope.
//! fn routes() -> Router<'static> {
//!     Router::new().get("/voice-tools/status/:id", Access::Key(Scope::CallsRead), status)
//! }
//!
//! async fn status(req: Request, params: Params) -> Result<Reply, ApiError> {
//!     gatehouse_http::require_no_body(&req)?;
//!     let id = params.call_id()?;
//!     // ...
//!     Ok(gatehouse_http::json_response(200, &serde_json::json!({"id": id.as_str()})).into())
//! }
//! ```

mod auth;
mod body;
mod response;
mod route;
mod router;
mod serve;

pub use auth::{identify, require_key, require_service_request, signed_nonce};
pub use body::{
    BodyError, MAX_BODY_BYTES, from_json_value, parse_body, read_json, read_optional_json, require_no_body,
};
/// Which component is serving: [`serve`] names it in every log line.
pub use gatehouse_platform::{Component, this_component};
pub use response::{RETRY_AFTER_SECONDS, error_response, json_response};
pub use route::{CHAINED_ROUTE, header, header_text, parse_call_id, prefer_wait, query_param, require_method};
pub use router::{Access, Params, Router};
pub use serve::{AfterResponse, Reply, serve};

pub use gatehouse_domain::keys::{Grant, Scope};
pub use gatehouse_domain::{ApiError, ErrorCode};

/// Declares the component's Spin entry point: every request goes through [`serve`] to the
/// [`Router`] that `routes`, a `fn() -> Router<'static>`, declares.
#[macro_export]
macro_rules! component {
    ($routes:path) => {
        #[::spin_sdk::http_component]
        async fn entry(req: $crate::IncomingRequest, out: $crate::ResponseOutparam) {
            $crate::serve($crate::this_component!(), req, out, |req| $routes().dispatch(req)).await
        }
    };
}
pub use spin_sdk::http::{IncomingRequest, Method, Request, Response, ResponseOutparam};
