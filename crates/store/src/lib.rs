//! Typed queries over Spin's PostgreSQL interface (`spin:postgres/postgres@4.0.0`).
//!
//! Every statement is parameterized; user input never becomes SQL text. Each public
//! function is one round trip, because the latency targets leave no room for two. Every
//! statement sent through `query` answers exactly one row, because Spin 4.0.x hangs on a
//! result with none (see `rows.rs`).

mod audit;
mod caller;
mod calls;
mod context;
mod contract;
mod credentials;
mod error;
mod health;
mod history;
mod keys;
mod records;
mod retention;
mod rows;

pub use audit::{CallCursor, CallFilter, MAX_CALLBACK_ATTEMPTS, callback_attempts, list_calls};
pub use caller::Caller;
pub use calls::{
    CallToDrive, Claim, Correction, ExpiredCall, Expiry, Insertion, Limit, NewCall, ParameterChange, Retry, ToolCall,
    Transition, begin_side_effect, cancel_call, claim_owed_discards, claim_owed_reports, claim_stranded_calls,
    complete_call, confirm_call, discard_settled, expire_stale_calls, fail_call, fail_exhausted_calls, get_call,
    get_call_to_drive, insert_call, mark_outcome_told, mark_prepared, modify_call, release_lease, reports_tried,
    resume_call,
};
pub use context::{CallSummary, ContextView, PendingCall, session_context_view};
pub use contract::{
    ClaimedOperation, OperationClaim, claim_operation, forget_sdk_call_records, forget_spent_nonces, spend_nonce,
};
pub use credentials::{cache_credential, cached_credential, forget_credential};
pub use error::StoreError;
pub use health::ping;
pub use history::{
    ExecutionCursor, ExecutionFilter, ToolExecution, fold_execution_rollups, record_tool_execution, tool_executions,
    tool_stats,
};
pub use keys::{key_grant, tenant_callbacks, tenant_limit};
pub use records::{
    CallbackAttempt, purge_expired_session_context, record_callback_attempt, session_context_get, session_context_put,
};
pub use retention::{PartitionsKept, Retention, forget_final_calls, keep_history_partitions};

pub use spin_sdk::pg4::Connection;

/// The latest instant a page cursor may name, in microseconds since 1970: the end of year
/// 9999. A cursor past it names no row this store wrote, and PostgreSQL refuses the interval.
pub const MAX_CURSOR_MICROS: i64 = 253_402_300_799_999_999;
