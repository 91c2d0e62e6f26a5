//! The Gmail tool: the private tool contract for `send_email`, and `POST /execute-gmail`.

use gatehouse_gmail::GmailTool;
use gatehouse_http::{IncomingRequest, ResponseOutparam};

#[spin_sdk::http_component]
async fn entry(req: IncomingRequest, out: ResponseOutparam) {
    gatehouse_tool::serve_tool_with_route(req, out, &GmailTool, "/execute-gmail", gatehouse_gmail::execute_gmail).await
}
