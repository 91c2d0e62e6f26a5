//! POST /voice-tools/pending: record a PENDING tool call and return what the agent should say.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Post)?;
    let request = gatehouse_http::read_json(&req)?;
    let idempotency_key = gatehouse_http::header(&req, "idempotency-key");
    let trace_id = gatehouse_http::trace_id();
    let created = gatehouse_lifecycle::create(&Ctx::new(), request, idempotency_key, &trace_id).await?;
    Ok(gatehouse_rest::created(&created))
}
