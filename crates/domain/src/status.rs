use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The state a tool call is in, as stored in `tool_calls.status`.
///
/// `MODIFIED` is deliberately absent: a modification leaves the call PENDING and only
/// shows up as an entry in `status_history`, so no row can ever *be* MODIFIED.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Pending,
    Executing,
    Prepared,
    Completed,
    Failed,
    Cancelled,
    Expired,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Pending,
        Status::Executing,
        Status::Prepared,
        Status::Completed,
        Status::Failed,
        Status::Cancelled,
        Status::Expired,
    ];

    /// The spelling used in the database, in JSON and in history entries.
    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Executing => "EXECUTING",
            Status::Prepared => "PREPARED",
            Status::Completed => "COMPLETED",
            Status::Failed => "FAILED",
            Status::Cancelled => "CANCELLED",
            Status::Expired => "EXPIRED",
        }
    }

    /// Open calls can still change state; they are what the agent must keep track of.
    pub const fn is_open(self) -> bool {
        matches!(self, Status::Pending | Status::Executing | Status::Prepared)
    }

    /// Settled calls are final: no transition leaves them.
    pub const fn is_settled(self) -> bool {
        !self.is_open()
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown tool call status {0:?}")]
pub struct ParseStatusError(pub String);

impl FromStr for Status {
    type Err = ParseStatusError;

    /// Exact, upper-case match only: the database never stores any other spelling, so
    /// anything else signals a bug rather than a value worth normalizing.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Status::ALL.into_iter().find(|status| status.as_str() == s).ok_or_else(|| ParseStatusError(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_spelling() {
        for status in Status::ALL {
            assert_eq!(status.as_str().parse::<Status>(), Ok(status));
            assert_eq!(status.to_string(), status.as_str());
        }
    }

    #[test]
    fn history_only_and_miscased_spellings_are_rejected() {
        assert!("MODIFIED".parse::<Status>().is_err());
        assert!("pending".parse::<Status>().is_err());
        assert!("".parse::<Status>().is_err());
        assert!(" PENDING".parse::<Status>().is_err());
    }

    #[test]
    fn open_and_settled_partition_the_statuses() {
        let open: Vec<_> = Status::ALL.into_iter().filter(|s| s.is_open()).collect();
        assert_eq!(open, [Status::Pending, Status::Executing, Status::Prepared]);
        for status in Status::ALL {
            assert_ne!(status.is_open(), status.is_settled(), "{status}");
        }
    }

    #[test]
    fn serde_uses_the_database_spelling() {
        assert_eq!(serde_json::to_string(&Status::Cancelled).ok().as_deref(), Some("\"CANCELLED\""));
        let parsed: Result<Status, _> = serde_json::from_str("\"PREPARED\"");
        assert_eq!(parsed.ok(), Some(Status::Prepared));
    }

    /// The migration's CHECK constraint and this enum must list the same statuses.
    #[test]
    fn migration_check_constraint_lists_exactly_these_statuses() {
        let sql = include_str!("../../../migrations/V1__tool_calls.sql");
        for status in Status::ALL {
            assert!(sql.contains(&format!("'{}'", status.as_str())), "{status} missing from V1");
        }
        assert!(!sql.contains("'MODIFIED'"), "MODIFIED must never be a stored status");
    }
}
