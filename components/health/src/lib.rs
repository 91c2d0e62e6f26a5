//! `GET /health`: open without a token, so load balancers and `up` can probe it.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router};
use serde_json::json;

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().get("/health", Access::Open, health)
}

async fn health(req: Request, _params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    match check_database() {
        Ok(()) => Ok(gatehouse_http::json_response(200, &json!({"status": "ok", "database": "ok"})).into()),
        Err(error) => {
            // A degraded health check is an answer, not a failure of this route; the
            // cause still goes to the operator's log.
            gatehouse_platform::log_error(&error);
            // A 503: `json_response` adds its Retry-After.
            let response =
                gatehouse_http::json_response(503, &json!({"status": "degraded", "database": "unavailable"}));
            Ok(response.into())
        }
    }
}

fn check_database() -> Result<(), ApiError> {
    let db = gatehouse_platform::open_db()?;
    gatehouse_store::ping(&db)?;
    Ok(())
}
