//! `/...`: every path that no other route matches, answered in the API's JSON error shape
//! rather than the host's plain-text 404.
//!
//! Spin routes by path alone and sends every method of a known path to that path's own
//! component, which answers 405 with `Allow` itself. So a request that reaches this component
//! is on a path the application does not serve with any method (an unknown path, or a known
//! route with an empty `:id`): 404 is the whole truth here.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().any("/...", Access::Open, not_found)
}

async fn not_found(_req: Request, _params: Params) -> Result<Reply, ApiError> {
    Err(ApiError::not_found("Nothing is served at this path. The routes are listed in openapi/gatehouse.yaml."))
}
