//! `POST /mcp` (and its 405s for GET and DELETE): the lifecycle as MCP tools.

use gatehouse_http::{IncomingRequest, ResponseOutparam};

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    let component = gatehouse_http::this_component!();
    gatehouse_http::serve(component, req, out, |req| gatehouse_mcp::handle(component, req)).await
}
