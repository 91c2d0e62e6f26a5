//! GET /voice-tools/status/:id: one call in full; a bounded long-poll under Prefer: wait=N.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().get("/voice-tools/status/:id", Access::Token, status)
}

async fn status(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let id = params.call_id()?;
    gatehouse_lifecycle::status(&id, gatehouse_http::prefer_wait(&req)).await
}
