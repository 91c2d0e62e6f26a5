//! The tool registry and each tool's execution history:
//! - `GET /voice-tools/tools`: every registered tool, as it describes itself;
//! - `GET /voice-tools/tools/:name/executions?limit=&outcome=&since=&cursor=`: newest first;
//! - `GET /voice-tools/tools/:name/stats?window=`.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope, query_param};
use gatehouse_lifecycle::ExecutionsQuery;

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new()
        .get("/voice-tools/tools", Access::Key(Scope::ToolsRead), list)
        .get("/voice-tools/tools/:name/executions", Access::Key(Scope::ToolsRead), executions)
        .get("/voice-tools/tools/:name/stats", Access::Key(Scope::ToolsRead), stats)
}

async fn list(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::list_tools(&gatehouse_rest::ctx(&params)?).await?))
}

async fn executions(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let name = params.text("name")?;
    let query = ExecutionsQuery {
        limit: query_param(&req, "limit")?,
        outcome: query_param(&req, "outcome")?,
        since: query_param(&req, "since")?,
        cursor: query_param(&req, "cursor")?,
    };
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::tool_executions(&gatehouse_rest::ctx(&params)?, &name, &query)?))
}

async fn stats(req: Request, params: Params) -> Result<Reply, ApiError> {
    gatehouse_http::require_no_body(&req)?;
    let name = params.text("name")?;
    let window = query_param(&req, "window")?;
    Ok(gatehouse_rest::ok(&gatehouse_lifecycle::tool_stats(&gatehouse_rest::ctx(&params)?, &name, window.as_deref())?))
}
