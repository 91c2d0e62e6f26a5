//! PATCH /voice-tools/modify/:id: change the parameters of a PENDING call with a JSON merge patch.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().patch("/voice-tools/modify/:id", Access::Key(Scope::CallsWrite), modify)
}

async fn modify(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_json(&req)?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::modify(&gatehouse_rest::ctx(&params)?, &id, request).await?))
}
