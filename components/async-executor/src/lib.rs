//! Private: runs a confirmed call up to its checkpoint, or to the end for tools that need none.

use gatehouse_http::{Access, ApiError, CHAINED_ROUTE, Params, Reply, Request, Router};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(routes);

/// Handed over by confirm, resume or the sweeper: by service chaining on one host, or at
/// `/internal/executor/...` signed with `contract_secret` from another (see `executor_url`).
/// It carries no bearer token.
fn routes() -> Router<'static> {
    Router::new().post(CHAINED_ROUTE, Access::Service, drive).post("/internal/executor/...", Access::Service, drive)
}

async fn drive(req: Request, _params: Params) -> Result<Reply, ApiError> {
    gatehouse_tool::spend_service_signature(&req)?;
    let request = gatehouse_http::read_json(&req)?;
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::drive(&Ctx::gatehouse(), request).await?))
}
