//! GET /voice-tools/tools: the tool registry, each tool as it describes itself.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_lifecycle::list_tools().await
}
