//! POST /resume-execution/:id: proceed or cancel at the checkpoint.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Post)?;
    let id = gatehouse_http::call_id(&req)?;
    let request = gatehouse_http::read_json(&req)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::resume(db, &id, request, gatehouse_http::prefer_wait(&req)).await
}
