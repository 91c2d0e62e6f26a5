//! Expires stale calls and re-drives stranded executions: privately for the host timer, and at POST /voice-tools/sweep.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    // The host timer reaches the private route by service chaining; every other request came
    // in on the public route (with any path it matches, `/voice-tools/sweep/` too) and needs
    // the token. Deciding on the path instead would let a trailing slash skip the check.
    if gatehouse_http::matched_route(&req) == Some(gatehouse_http::CHAINED_ROUTE) {
        gatehouse_http::require_method(&req, Method::Post)?;
    } else {
        gatehouse_http::admit(&req, Method::Post)?;
    }
    gatehouse_http::require_no_body(&req)?;
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::sweep(&Ctx::new()).await?))
}
