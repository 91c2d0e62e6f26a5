//! POST /resume-execution/:id: proceed or cancel at the checkpoint.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().post("/resume-execution/:id", Access::Token, resume)
}

async fn resume(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_json(&req)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::resume(db, &id, request, gatehouse_http::prefer_wait(&req)).await
}
