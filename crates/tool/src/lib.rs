//! The tool contract (docs/architecture.md, "The tool contract") over Spin service chaining.
//!
//! [`ToolClient`] is what the lifecycle components use to reach a tool by its component id;
//! [`Tool`] and [`serve_tool`] are what a tool component implements and runs. The server side
//! writes one `tool_executions` row per operation after it has answered, so the history never
//! slows or fails the call it records; [`history`] is the one place such a row is made.
//!
//! # A tool component of your own
//!
//! A component outside this workspace depends on this crate by path or git (with `spin-sdk` 5.2
//! for its entry point), implements [`Tool`] and declares its entry point with
//! [`tool_component!`]. The server keeps the contract around it: the service signature (or
//! service chaining), the ordering rules, `execute` at most once per call, and the history rows.
//! `gatehouse new tool NAME --lang rust` writes such a crate (`templates/tool-rust`), which
//! `sdk/test` renders and builds in CI:
//!
//! ```ignore
//! use gatehouse_tool::{Checkpoint, Executed, FieldProblem, Tool, ToolDescription, ToolFailure, ToolRequest};
//! use serde_json::{Map, Value, json};
//!
//! struct OrderParts;
//!
//! gatehouse_tool::tool_component!(OrderParts);
//!
//! impl Tool for OrderParts {
//!     fn describe(&self) -> ToolDescription {
//!         ToolDescription { name: "order_parts".into(), description: "Orders parts.".into(),
//!             parameters_schema: json!({"type": "object"}), needs_checkpoint: true, ..Default::default() }
//!     }
//!     fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
//!         Ok(parameters)
//!     }
//!     fn summarize(&self, _: &Map<String, Value>) -> String { "I'll order the parts. Shall I?".into() }
//!     async fn prepare(&self, _: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure> { Ok(None) }
//!     async fn execute(&self, _: &ToolRequest) -> Result<Executed, ToolFailure> {
//!         Ok(Executed { result: json!({}), voice_response: "Ordered.".into() })
//!     }
//!     async fn discard(&self, _: &ToolRequest) -> Result<(), ToolFailure> { Ok(()) }
//! }
//! ```
#![deny(missing_docs)]

mod client;
mod guard;
pub mod history;
mod registry;
mod server;

pub use client::{ToolClient, ToolError};
pub use gatehouse_domain::contract::{Checkpoint, Executed, ToolDescription, ToolEffects, ToolRequest};
pub use gatehouse_domain::{FieldProblem, SessionId, ToolCallId};
/// Opens Gatehouse's database (the component's `db_url` variable), for a tool's own tables.
pub use gatehouse_platform::open_db;
pub use guard::spend_service_signature;
pub use registry::{RegistryEntry, ToolRegistry, ToolTarget};
pub use server::{FailureKind, Tool, ToolFailure, accept, contract_routes, describe_as, identity, serve_tool};

/// What [`tool_component!`] expands to names, so a component needs only this crate and spin-sdk.
#[doc(hidden)]
pub mod __private {
    pub use gatehouse_http;
}
