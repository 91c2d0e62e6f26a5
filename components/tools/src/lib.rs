//! The tool registry and each tool's execution history:
//! - `GET /voice-tools/tools`: every registered tool, as it describes itself;
//! - `GET /voice-tools/tools/:name/executions?limit=&outcome=&since=&cursor=`: newest first;
//! - `GET /voice-tools/tools/:name/stats?window=`.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

use gatehouse_http::{ApiError, Method, Reply, Request, query_param};
use gatehouse_lifecycle::{Ctx, ExecutionsQuery};

gatehouse_http::component!(handle);

async fn handle(req: Request) -> Result<Reply, ApiError> {
    gatehouse_http::admit(&req, Method::Get)?;
    gatehouse_http::require_no_body(&req)?;
    // Dispatched on the route pattern, so a trailing slash cannot change which route answers.
    let route = gatehouse_http::matched_route(&req).unwrap_or_default();
    let ctx = Ctx::new();
    if route.ends_with("/executions") {
        let name = gatehouse_http::path_param(&req, "name")?;
        let query = ExecutionsQuery {
            limit: query_param(&req, "limit")?,
            outcome: query_param(&req, "outcome")?,
            since: query_param(&req, "since")?,
            cursor: query_param(&req, "cursor")?,
        };
        Ok(gatehouse_rest::ok(&gatehouse_lifecycle::tool_executions(&ctx, &name, &query)?))
    } else if route.ends_with("/stats") {
        let name = gatehouse_http::path_param(&req, "name")?;
        Ok(gatehouse_rest::ok(&gatehouse_lifecycle::tool_stats(&ctx, &name, query_param(&req, "window")?.as_deref())?))
    } else {
        Ok(gatehouse_rest::ok(&gatehouse_lifecycle::list_tools(&ctx).await?))
    }
}
