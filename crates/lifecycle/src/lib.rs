//! The tool-call lifecycle (SPEC §4): create, modify, confirm, resume, cancel, status, the
//! executor's drive, the gated direct flows and the sweeper.
//!
//! Operations take a [`Ctx`] (settings read once per request, and the one rule for reaching
//! the database) and return typed answers, or an [`Outcome`] when there is work to do after
//! the answer; nothing here speaks HTTP to its caller. The REST components and the MCP
//! endpoint each turn the same answer into their own. Both ways a call runs, the executor and
//! the direct flows, walk it through one [`flow`] with their own policy between the steps.
//!
//! Nothing here is tool-specific: tools are reached through the tool contract, or run in the
//! component of a direct flow through the same [`Tool`](gatehouse_tool::Tool) trait.

mod audit;
mod callbacks;
mod cancel;
mod confirm;
mod context;
mod create;
mod direct;
mod drive;
mod flow;
mod modify;
mod outcome;
mod rejection;
mod status;
mod sweep;
mod tools;

pub use audit::{CallsQuery, callback_attempts, list_calls};
pub use cancel::{CancelRequest, cancel};
pub use confirm::{ConfirmRequest, ResumeRequest, confirm, resume};
pub use context::Ctx;
pub use create::{CreateRequest, create};
pub use direct::{DirectFlow, Envelope, Gate};
pub use drive::{DriveRequest, Driven, drive};
pub use modify::{ModifyRequest, modify};
pub use outcome::{Brief, FollowUp, Outcome, Progress};
pub use status::{SessionCalls, context, session_context, session_id, status};
pub use sweep::{SweepReport, sweep};
pub use tools::{ExecutionsQuery, describe_tools, is_registered_name, list_tools, tool_executions, tool_stats};
