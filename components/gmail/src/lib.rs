//! The Gmail tool: the private tool contract for `send_email`, and `POST /execute-gmail`.

use gatehouse_gmail::GmailTool;
use gatehouse_http::{IncomingRequest, ResponseOutparam};

/// The public route; everything else reaches this component through service chaining.
const DIRECT_FLOW_PATH: &str = "/execute-gmail";

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    if req.path_with_query().is_some_and(|path| path.split('?').next() == Some(DIRECT_FLOW_PATH)) {
        gatehouse_http::serve(req, out, gatehouse_gmail::execute_gmail).await
    } else {
        gatehouse_tool::serve_tool(req, out, &GmailTool).await
    }
}
