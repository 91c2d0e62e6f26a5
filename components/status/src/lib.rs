//! GET /voice-tools/status/:id: one call in full; a bounded long-poll under Prefer: wait=N.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().get("/voice-tools/status/:id", Access::Token, status)
}

async fn status(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let id = params.call_id()?;
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::status(&Ctx::new(), &id, wait).await?))
}
