//! The Gmail tool: the private tool contract for `send_email`, and `POST /execute-gmail`.

gatehouse_tool::tool_component!(gatehouse_gmail::GmailTool, "/execute-gmail" => gatehouse_gmail::execute_gmail);
