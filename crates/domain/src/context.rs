//! How much the context route (`GET /voice-tools/context/:session`) tells about a session.
//!
//! Its lists hold the newest calls only, with counts beside them, so that a relay that loops,
//! or a caller who keeps asking, cannot make every later read of the session slower and larger.

/// How many open calls `pending` lists: the newest ones.
pub const PENDING_LIMIT: i64 = 20;
/// How many settled calls `recent` lists: the newest ones.
pub const RECENT_LIMIT: i64 = 10;
/// `pending_total` and `recent_total` are exact up to this and read no further rows: a count
/// equal to it means "this many or more".
pub const COUNT_CAP: i64 = 100;
