//! `GET /voice-tools/context/:session`: the open and recent tool calls of a session,
//! which the relay gives the agent so it knows what is in flight.

// ApiError is a few pointers wide; it only travels the failure path, where its size
// costs nothing measurable, and boxing it would clutter every handler.
#![allow(clippy::result_large_err)]

use gatehouse_domain::SessionId;
use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_store::ContextView;
use serde::Serialize;

gatehouse_http::component!(handle);

#[derive(Serialize)]
struct ContextResponse<'a> {
    session_id: &'a SessionId,
    #[serde(flatten)]
    view: ContextView,
}

/// The stored-context route; every other request came in on `/voice-tools/context/:session`.
const SESSION_CONTEXT_PATH: &str = "/get-session-context";

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    if req.path() == SESSION_CONTEXT_PATH {
        return stored_context(&req);
    }
    let session_id = session_id(&gatehouse_http::path_param(&req, "session")?)?;
    let db = gatehouse_http::open_db()?;
    let view = gatehouse_store::session_context_view(&db, &session_id)?;
    Ok(gatehouse_http::json_response(200, &ContextResponse { session_id: &session_id, view }).into())
}

/// `GET /get-session-context?session_id=&context_key=`: what a tool left for this session.
fn stored_context(req: &Request) -> Result<Reply, ApiError> {
    let session = gatehouse_http::query_param(req, "session_id").unwrap_or_default();
    let key = gatehouse_http::query_param(req, "context_key").unwrap_or_default();
    if key.is_empty() {
        return Err(ApiError::invalid_input("Say which context to read.").with_field("context_key", "is required"));
    }
    let session_id = session_id(&session)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::session_context(&db, &session_id, &key)
}

fn session_id(raw: &str) -> Result<SessionId, ApiError> {
    SessionId::parse(raw)
        .map_err(|e| ApiError::invalid_input("The session id is not valid.").with_field("session_id", e.to_string()))
}
