//! GET /voice-tools/status/:id: one call in full; a bounded long-poll under Prefer: wait=N.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_http::require_no_body(&req)?;
    let id = gatehouse_http::call_id(&req)?;
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::status(&Ctx::new(), &id, wait).await?))
}
