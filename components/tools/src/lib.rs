//! GET /voice-tools/tools: the tool registry, each tool as it describes itself.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, IncomingRequest, Method, Reply, Request, ResponseOutparam};

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    gatehouse_http::serve(req, out, handle).await
}

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_lifecycle::list_tools().await
}
