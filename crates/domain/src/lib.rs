//! The Gatehouse domain model, shared by every component and by the runner.
//!
//! This crate is plain Rust with no Spin dependency, so its rules can be unit-tested
//! natively and reused by code that never runs inside a component.

mod error;
mod ids;
mod status;

pub use error::{ApiError, ErrorCode, FieldProblem};
pub use ids::{InvalidId, MAX_SESSION_ID_LEN, SessionId, ToolCallId};
pub use status::{ParseStatusError, Status};
