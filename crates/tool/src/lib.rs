//! The tool contract (docs/architecture.md, "The tool contract") over Spin service chaining.
//!
//! [`ToolClient`] is what the lifecycle components use to reach a tool by its component id;
//! [`Tool`] and [`serve_tool`] are what a tool component implements and runs. The server side
//! writes one `tool_executions` row per operation after it has answered, so the history never
//! slows or fails the call it records; [`history`] is the one place such a row is made.

mod client;
mod guard;
pub mod history;
mod registry;
mod server;

pub use client::{ToolClient, ToolError};
pub use guard::spend_service_signature;
pub use registry::{RegistryEntry, ToolRegistry, ToolTarget};
pub use server::{Tool, ToolFailure, accept, contract_routes, describe_as, identity, serve_tool};
