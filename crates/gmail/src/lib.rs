//! The `send_email` tool (docs/architecture.md, "The Gmail tool"): it checks the addresses and
//! headers, builds a correct RFC 5322 message, creates a Gmail draft at the checkpoint and
//! sends that draft once.
//!
//! The Gmail API and OAuth endpoints are variables, so tests and local runs point them at a
//! server that speaks the same protocol; there is no other code path.
//!
//! No email is sent twice: every message carries a `Message-ID` derived from its tool call,
//! and a send whose outcome is unknown is settled by asking Gmail (the draft's existence and
//! a search of the Sent folder) before anything is sent again.

mod address;
mod api;
mod config;
mod error;
mod message;
mod oauth;
mod params;
mod percent;
mod seal;
mod tool;

pub use address::{Address, AddressError};
pub use message::{Message, encode_subject};
pub use params::{EmailParameters, summarize};
pub use tool::GmailTool;
