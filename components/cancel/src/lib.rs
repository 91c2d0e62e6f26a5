//! DELETE /voice-tools/cancel/:id: cancel a call that has not started its side effect.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Delete)?;
    let id = gatehouse_http::call_id(&req)?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::cancel(&db, &id, request).await
}
