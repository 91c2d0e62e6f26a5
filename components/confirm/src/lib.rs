//! POST /voice-tools/confirm/:id: PENDING to EXECUTING; answers 202 at once, then hands the call to the executor.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().post("/voice-tools/confirm/:id", Access::Token, confirm)
}

async fn confirm(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::confirm(db, &id, request, gatehouse_http::prefer_wait(&req)).await
}
