//! A declared tool: the tool contract served from the declaration in this component's
//! `declaration` variable (docs/tools.md, "A declared tool"). One `.wasm` serves every declared
//! tool; each has its own component entry in spin.toml, with its own variables and history.

use gatehouse_http::{IncomingRequest, ResponseOutparam};

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    let component = gatehouse_http::this_component!();
    match gatehouse_declared_tool::DeclaredTool::load() {
        Ok(tool) => gatehouse_tool::serve_tool(component, req, out, &tool).await,
        Err(error) => gatehouse_http::serve(component, req, out, |_| async move { Err(error.into()) }).await,
    }
}
