//! POST /voice-tools/pending: record a PENDING tool call and return what the agent should say.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Router, Scope};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().post("/voice-tools/pending", Access::Key(Scope::CallsWrite), create)
}

async fn create(req: Request, params: Params) -> Result<Reply, ApiError> {
    let request = gatehouse_http::read_json(&req)?;
    let idempotency_key = gatehouse_http::header_text(&req, "idempotency-key")?;
    let trace_id = gatehouse_platform::trace_id();
    let created =
        gatehouse_lifecycle::create(&gatehouse_rest::ctx(&params)?, request, idempotency_key, &trace_id).await?;
    Ok(gatehouse_rest::created(&created))
}
