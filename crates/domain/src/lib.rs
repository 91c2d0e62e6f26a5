//! The Gatehouse domain model, shared by every component and by the runner.
//!
//! This crate is plain Rust with no Spin dependency, so its rules can be unit-tested
//! natively and reused by code that never runs inside a component.

mod allowlist;
pub mod callback;
pub mod context;
pub mod contract;
mod error;
mod ids;
pub mod keys;
pub mod limits;
mod patch;
mod prefer;
pub mod sealed;
pub mod service_auth;
pub mod signing;
pub mod sql;
mod status;
pub mod tenant_callbacks;
mod time;

pub use allowlist::{CallbackAllowlist, CallbackUrlError};
pub use error::{ApiError, ErrorCode, FieldProblem, RETRY_AFTER_SECONDS, retry_after};
pub use ids::{InvalidId, MAX_SESSION_ID_LEN, SessionId, SessionOf, ToolCallId};
pub use patch::{FieldChange, changed_fields, merge_patch};
pub use prefer::{MAX_WAIT, preference_applied, wait_preference};
pub use status::{ParseStatusError, Status};
pub use time::{
    CLOCK_SLACK_SECONDS, MAX_WINDOW_SECONDS, is_rfc3339, parse_window, stats_partition_bounds, unix_seconds,
};
