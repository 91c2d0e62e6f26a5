//! PATCH /voice-tools/modify/:id: change the parameters of a PENDING call with a JSON merge patch.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().patch("/voice-tools/modify/:id", Access::Token, modify)
}

async fn modify(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_json(&req)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::modify(&db, &id, request).await
}
