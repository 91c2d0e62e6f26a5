//! The tool-call lifecycle (docs/architecture.md, "The lifecycle"): create, modify, confirm,
//! resume, cancel, status, the executor's drive, the gated direct flows and the sweeper.
//!
//! Operations take a [`Ctx`] (settings read once per request, and the one rule for reaching
//! the database) and return typed answers (all in [`answers`]), or an [`Outcome`] when there is work to do after
//! the answer; nothing here speaks HTTP to its caller. The REST components and the MCP
//! endpoint each turn the same answer into their own. Both ways a call runs, the executor and
//! the direct flows, walk it through one [`flow`] with their own policy between the steps.
//!
//! Nothing here is tool-specific: tools are reached through the tool contract, or run in the
//! component of a direct flow through the same [`Tool`](gatehouse_tool::Tool) trait.

mod answers;
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
mod tool_ops;
mod tools;

pub use answers::{
    Brief, CallbackAttempts, CallsPage, Created, DeliveryAttempt, Driven, ExecutionsPage, LastError, ListedCall,
    ListedTool, Modified, OperationStats, OutcomeCounts, OutcomeTold, Progress, RecordedExecution, SessionCalls,
    SessionContext, SweepReport, TimelineBucket, ToolList, ToolStats,
};
pub use audit::{CallsQuery, callback_attempts, list_calls, mark_outcome_told};
pub use cancel::{CancelRequest, cancel};
pub use confirm::{ConfirmRequest, ResumeRequest, confirm, resume};
pub use context::Ctx;
pub use create::{CreateRequest, create};
pub use direct::{DirectFlow, Envelope, Gate};
pub use drive::{DriveRequest, drive};
pub use modify::{ModifyRequest, modify};
pub use outcome::{FollowUp, Outcome};
pub use status::{context, session_context, session_id, status};
pub use sweep::sweep;
pub use tools::{ExecutionsQuery, describe_tools, is_registered_name, list_tools, tool_executions, tool_stats};
