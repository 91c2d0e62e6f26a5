//! The reads of calls, and the one mark a relay leaves on a call:
//! - `GET /voice-tools/status/:id`: one call in full; a bounded long-poll under Prefer: wait=N;
//! - `GET /voice-tools/calls?session_id=&function_name=&status=&limit=&cursor=`: every call,
//!   newest first, a page at a time;
//! - `GET /voice-tools/calls/:id/callbacks`: the callback attempts of one call;
//! - `POST /voice-tools/calls/:id/outcome-told`: the relay's mark that the caller heard a settled
//!   call's outcome, made once (docs/architecture.md, "Voice sessions");
//! - `GET /voice-tools/key`: the key the request was made with (its tenant, prefix and scopes),
//!   for a client such as the dashboard to show what it may do.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope, query_param};
use gatehouse_lifecycle::CallsQuery;

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new()
        .get("/voice-tools/status/:id", Access::Key(Scope::CallsRead), status)
        .get("/voice-tools/calls", Access::Key(Scope::CallsRead), calls)
        .get("/voice-tools/calls/:id/callbacks", Access::Key(Scope::CallsRead), callbacks)
        .post("/voice-tools/calls/:id/outcome-told", Access::Key(Scope::CallsWrite), outcome_told)
        .get("/voice-tools/key", Access::AnyKey, key)
}

async fn key(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    Ok(gatehouse_rest::ok(params.grant()?))
}

async fn status(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let id = params.call_id()?;
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::status(&gatehouse_rest::ctx(&params)?, &id, wait).await?))
}

async fn calls(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let query = CallsQuery {
        session_id: query_param(&req, "session_id")?,
        function_name: query_param(&req, "function_name")?,
        status: query_param(&req, "status")?,
        limit: query_param(&req, "limit")?,
        cursor: query_param(&req, "cursor")?,
    };
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::list_calls(&gatehouse_rest::ctx(&params)?, &query)?))
}

async fn callbacks(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let id = params.call_id()?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::callback_attempts(&gatehouse_rest::ctx(&params)?, &id)?))
}

async fn outcome_told(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let id = params.call_id()?;
    let key = gatehouse_http::header_text(&req, "idempotency-key")?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::mark_outcome_told(&gatehouse_rest::ctx(&params)?, &id, key)?))
}
