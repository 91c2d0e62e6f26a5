//! Expires stale calls and re-drives stranded executions: privately for the host timer, and at POST /voice-tools/sweep.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};

gatehouse_http::component!(handle);

/// The public route; the host timer reaches the private route with another path.
const PUBLIC_PATH: &str = "/voice-tools/sweep";

async fn handle(req: Request) -> Result<Reply, ApiError> {
    if req.path() == PUBLIC_PATH {
        gatehouse_http::admit(&req, Method::Post)?;
    } else {
        gatehouse_http::require_method(&req, Method::Post)?;
    }
    gatehouse_http::require_no_body(&req)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::sweep(&db).await
}
