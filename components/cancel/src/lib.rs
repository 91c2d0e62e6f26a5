//! DELETE /voice-tools/cancel/:id: cancel a call that has not started its side effect.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().delete("/voice-tools/cancel/:id", Access::Key(Scope::CallsWrite), cancel)
}

async fn cancel(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::cancel(&gatehouse_rest::ctx(&params)?, &id, request).await?))
}
