//! `POST /mcp` (and its 405s for GET and DELETE): the lifecycle as MCP tools.

use gatehouse_http::{Access, Router};

gatehouse_http::component!(routes);

/// Every method reaches `gatehouse_mcp::handle`, which checks the token, then the `Origin`,
/// then answers 405 to anything but POST: the transport's order, not the router's.
fn routes() -> Router<'static> {
    let component = gatehouse_http::this_component!();
    Router::new().any("/mcp", Access::Open, move |req, _params| gatehouse_mcp::handle(component, req))
}
