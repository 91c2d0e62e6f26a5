//! The Gmail tool: the private tool contract for `send_email`, and `POST /execute-gmail`.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

mod flow;

gatehouse_tool::tool_component!(gatehouse_gmail::GmailTool, "/execute-gmail" => flow::execute_gmail);
