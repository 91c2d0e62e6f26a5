//! Typed queries over Spin's PostgreSQL interface (`spin:postgres/postgres@4.0.0`).
//!
//! Every statement is parameterized; user input never becomes SQL text. Each public
//! function is one round trip, because the latency targets leave no room for two.

// ApiError is a few pointers wide; it only travels the failure path, where its size
// costs nothing measurable, and boxing it would clutter every handler.
#![allow(clippy::result_large_err)]

mod context;
mod error;
mod health;

pub use context::{CallSummary, ContextView, PendingCall, session_context_view};
pub use error::StoreError;
pub use health::ping;

pub use spin_sdk::pg4::Connection;
