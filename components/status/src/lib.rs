//! GET /voice-tools/status/:id: one call in full; a bounded long-poll under Prefer: wait=N.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_http::require_no_body(&req)?;
    let id = gatehouse_http::call_id(&req)?;
    gatehouse_lifecycle::status(&id, gatehouse_http::prefer_wait(&req)).await
}
