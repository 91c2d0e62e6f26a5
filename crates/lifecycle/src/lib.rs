//! The tool-call lifecycle (SPEC §4): create, modify, confirm, resume, cancel, status, the
//! executor's drive and the sweeper. Components are thin HTTP adapters over these functions,
//! and the MCP endpoint calls the same ones.
//!
//! Nothing here is tool-specific: tools are reached only through the contract client.

// ApiError is a few pointers wide; it only travels the failure path.
#![allow(clippy::result_large_err)]

mod callbacks;
mod cancel;
mod config;
mod confirm;
mod create;
mod drive;
pub mod gated;
mod modify;
mod rejection;
mod status;
mod sweep;
mod tools;

pub use cancel::{CancelRequest, cancel};
pub use config::Config;
pub use confirm::{ConfirmRequest, ResumeRequest, confirm, resume};
pub use create::{CreateRequest, create};
pub use drive::{DriveRequest, drive};
pub use modify::{ModifyRequest, modify};
pub use status::{context, session_context, session_id, status};
pub use sweep::{SweepReport, sweep};
pub use tools::{ExecutionsQuery, describe_tools, list_tools, tool_executions, tool_stats};
