//! `GET /voice-tools/context/:session`: the open and recent tool calls of a session, which the
//! relay gives the agent so it knows what is in flight; and `GET /get-session-context`, what a
//! tool stored for the session.

// ApiError is a few pointers wide; it only travels the failure path, where its size
// costs nothing measurable, and boxing it would clutter every handler.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

/// The stored-context route; every other request came in on `/voice-tools/context/:session`.
const SESSION_CONTEXT_ROUTE: &str = "/get-session-context";

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_http::require_no_body(&req)?;
    if gatehouse_http::matched_route(&req) == Some(SESSION_CONTEXT_ROUTE) {
        return stored_context(&req);
    }
    let session = gatehouse_http::path_param(&req, "session")?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::context(&Ctx::new(), &session)?))
}

/// `GET /get-session-context?session_id=&context_key=`.
fn stored_context(req: &Request) -> Result<Reply, ApiError> {
    let session = gatehouse_http::query_param(req, "session_id")?.unwrap_or_default();
    let key = gatehouse_http::query_param(req, "context_key")?.unwrap_or_default();
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::session_context(&Ctx::new(), &session, &key)?))
}
