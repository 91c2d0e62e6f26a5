//! POST /voice-tools/confirm/:id: PENDING to EXECUTING; answers 202 at once, then hands the call to the executor.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().post("/voice-tools/confirm/:id", Access::Key(Scope::CallsWrite), confirm)
}

async fn confirm(req: Request, params: Params) -> Result<Reply, ApiError> {
    let id = params.call_id()?;
    let request = gatehouse_http::read_optional_json(&req)?.unwrap_or_default();
    let wait = gatehouse_http::prefer_wait(&req);
    Ok(gatehouse_rest::progress(
        gatehouse_lifecycle::confirm(&gatehouse_rest::ctx(&params)?, &id, request, wait).await?,
    ))
}
