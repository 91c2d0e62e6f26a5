//! Private: runs a confirmed call up to its checkpoint, or to the end for tools that need none.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    // Handed over by confirm, resume or the sweeper: by service chaining on one host, or signed
    // with `contract_secret` from another (see `executor_url`). It carries no bearer token.
    gatehouse_http::require_method(&req, Method::Post)?;
    gatehouse_http::require_service_request(&req)?;
    let request = gatehouse_http::read_json(&req)?;
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::drive(&Ctx::new(), request).await?))
}
