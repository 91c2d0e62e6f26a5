//! DELETE /voice-tools/cancel/:id: cancel a call that has not started its side effect.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().delete("/voice-tools/cancel/:id", Access::Token, cancel)
}

async fn cancel(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::cancel(&db, &id, request).await
}
