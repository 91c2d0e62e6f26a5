//! `GET /voice-tools/context/:session`: the open and recent tool calls of a session, which the
//! relay gives the agent so it knows what is in flight; and `GET /get-session-context`, what a
//! tool stored for the session.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().get("/voice-tools/context/:session", Access::Key(Scope::CallsRead), session_calls).get(
        "/get-session-context",
        Access::Key(Scope::CallsRead),
        stored_context,
    )
}

/// `GET /voice-tools/context/:session`.
async fn session_calls(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let calls = gatehouse_lifecycle::context(&gatehouse_rest::ctx(&params)?, &params.text("session")?)?;
    Ok(gatehouse_rest::ok(&calls))
}

/// `GET /get-session-context?session_id=&context_key=`.
async fn stored_context(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let session = gatehouse_http::query_param(&req, "session_id")?.unwrap_or_default();
    let key = gatehouse_http::query_param(&req, "context_key")?.unwrap_or_default();
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::session_context(&gatehouse_rest::ctx(&params)?, &session, &key)?))
}
