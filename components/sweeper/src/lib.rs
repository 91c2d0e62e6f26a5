//! Expires stale calls and re-drives stranded executions: privately for the host timer, and at POST /voice-tools/sweep.

use gatehouse_http::{Access, ApiError, CHAINED_ROUTE, ErrorCode, Params, Reply, Request, Router, Scope};
use gatehouse_lifecycle::Ctx;

gatehouse_http::component!(routes);

/// The host timer reaches the private route by service chaining, which only components of
/// this application can do; everyone else comes in on the public route, which needs the token
/// whatever path matched it (`/voice-tools/sweep/` too: the router decides on the route).
fn routes() -> Router<'static> {
    Router::new().post(CHAINED_ROUTE, Access::Open, sweep).post(
        "/voice-tools/sweep",
        Access::Key(Scope::Admin),
        operator,
    )
}

/// A sweep touches every tenant's calls, so only the operator may ask for one: an admin key of
/// the first tenant, or `api_token` (docs/keys.md).
async fn operator(req: Request, params: Params) -> Result<Reply, ApiError> {
    if !params.grant()?.is_operator() {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "Only the operator's admin key can run the sweeper, since it acts on every tenant's calls.",
        ));
    }
    sweep(req, params).await
}

async fn sweep(req: Request, _params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    Ok(gatehouse_rest::outcome(gatehouse_lifecycle::sweep(&Ctx::gatehouse()).await?))
}
