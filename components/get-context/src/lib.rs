//! `GET /voice-tools/context/:session`: the open and recent tool calls of a session,
//! which the relay gives the agent so it knows what is in flight.

// ApiError is a few pointers wide; it only travels the failure path, where its size
// costs nothing measurable, and boxing it would clutter every handler.
#![allow(clippy::result_large_err)]

use gatehouse_domain::SessionId;
use gatehouse_http::{ApiError, IncomingRequest, Method, Request, Response};
use gatehouse_store::ContextView;
use serde::Serialize;

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest) -> Response {
    gatehouse_http::serve(req, handle).await
}

#[derive(Serialize)]
struct ContextResponse<'a> {
    session_id: &'a SessionId,
    #[serde(flatten)]
    view: ContextView,
}

fn handle(req: Request) -> Result<Response, ApiError> {
    gatehouse_http::require_method(&req, Method::Get)?;
    gatehouse_http::require_bearer(&req)?;
    let session_id = SessionId::parse(&gatehouse_http::path_param(&req, "session")?).map_err(|e| {
        ApiError::invalid_input("The session id in the address is not valid.").with_field("session_id", e.to_string())
    })?;

    let db = gatehouse_http::open_db()?;
    let view = gatehouse_store::session_context_view(&db, &session_id)?;
    Ok(gatehouse_http::json_response(200, &ContextResponse { session_id: &session_id, view }))
}
