//! PATCH /voice-tools/modify/:id: change the parameters of a PENDING call with a JSON merge patch.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Patch)?;
    let id = gatehouse_http::call_id(&req)?;
    let request = gatehouse_http::read_json(&req)?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::modify(&Ctx::new(), &id, request).await?))
}
