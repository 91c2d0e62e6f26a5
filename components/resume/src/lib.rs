//! POST /resume-execution/:id: proceed or cancel at the checkpoint.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Post)?;
    let id = gatehouse_http::call_id(&req)?;
    let request = gatehouse_http::read_json(&req)?;
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::progress(gatehouse_lifecycle::resume(&Ctx::new(), &id, request, wait).await?))
}
