//! The Gmail tool: the private tool contract for `send_email`, and `POST /execute-gmail`.

mod flow;

gatehouse_tool::tool_component!(gatehouse_gmail::GmailTool, "/execute-gmail" => flow::execute_gmail);
