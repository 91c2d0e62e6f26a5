//! DELETE /voice-tools/cancel/:id: cancel a call that has not started its side effect.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Delete)?;
    let id = gatehouse_http::call_id(&req)?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::cancel(&Ctx::new(), &id, request).await?))
}
