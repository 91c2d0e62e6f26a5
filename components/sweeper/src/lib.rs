//! Expires stale calls and re-drives stranded executions: privately for the host timer, and at POST /voice-tools/sweep.

use gatehouse_http::{Access, ApiError, CHAINED_ROUTE, Params, Reply, Request, Router, Scope};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(routes);

/// The host timer reaches the private route by service chaining, which only components of
/// this application can do; everyone else comes in on the public route, which needs the token
/// whatever path matched it (`/voice-tools/sweep/` too: the router decides on the route).
fn routes() -> Router<'static> {
    Router::new().post(CHAINED_ROUTE, Access::Open, sweep).post("/voice-tools/sweep", Access::Key(Scope::Admin), sweep)
}

async fn sweep(req: Request, _params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::sweep(&Ctx::new()).await?))
}
