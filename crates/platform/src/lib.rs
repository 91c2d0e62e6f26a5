//! What a Gatehouse component asks of its Spin host besides serving its request: a database
//! connection, outbound HTTP with deadlines, timers, secure randomness (ids, tokens), signed
//! service calls between hosts, and the trace context and JSON log lines of the request.
//!
//! Serving a request (routing, bodies, auth, responses) is `gatehouse-http`'s job, above this.

mod db;
mod outbound;
mod random;
mod service;
mod trace;

pub use db::open_db;
pub use outbound::{Method, OutboundResponse, SendFailure, send, sleep, within};
pub use random::{new_token, new_tool_call_id, random_bytes};
pub use service::{contract_secrets, service_signature, unix_now};
pub use trace::{Component, begin_span, log_error, log_event, log_line, trace_id, traceparent};
