//! POST /resume-execution/:id: proceed or cancel at the checkpoint.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().post("/resume-execution/:id", Access::Key(Scope::CallsWrite), resume)
}

async fn resume(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_json(&req)?;
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::progress(gatehouse_lifecycle::resume(&gatehouse_rest::ctx(&params)?, &id, request, wait).await?))
}
