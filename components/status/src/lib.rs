//! GET /voice-tools/status/:id: one call in full; a bounded long-poll under Prefer: wait=N.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, IncomingRequest, Method, Reply, Request, ResponseOutparam};

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    gatehouse_http::serve(req, out, handle).await
}

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    let id = gatehouse_http::call_id(&req)?;
    let db = gatehouse_http::open_db()?;
    gatehouse_lifecycle::status(&db, &id, gatehouse_http::prefer_wait(&req)).await
}
