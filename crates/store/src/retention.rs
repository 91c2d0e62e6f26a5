//! Retention (docs/architecture.md, "Retention"): the history (executions, callback attempts,
//! the stats' rollups) goes a whole week partition at a time; final calls go in small batches.

use serde::Deserialize;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;
use crate::rows::{count, optional};

pub(crate) const KEEP_PARTITIONS: &str = include_str!("sql/retention/keep_partitions.sql");
pub(crate) const FORGET_FINAL_CALLS: &str = include_str!("sql/retention/forget_final_calls.sql");

/// How many days of each kind of data are kept; 0 keeps everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Executions, callback attempts and the stats' rollups, by week partition.
    pub history_days: i32,
    /// Final calls, counted from their creation.
    pub calls_days: i32,
}

/// What one upkeep of the history's partitions did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct PartitionsKept {
    pub created: i64,
    pub dropped: i64,
}

/// Creates the history's week partitions holding today and the week after it, and drops those
/// wholly older than `retention_days` (0 keeps everything). Another sweeper doing the same at
/// that moment makes this one do nothing.
pub fn keep_history_partitions(db: &Connection, retention_days: i32) -> Result<PartitionsKept, StoreError> {
    Ok(optional(db, KEEP_PARTITIONS, &[ParameterValue::Int32(retention_days)])?.unwrap_or_default())
}

/// Forgets at most `batch` final calls created more than `retention_days` ago; how many.
pub fn forget_final_calls(db: &Connection, retention_days: i32, batch: i64) -> Result<i64, StoreError> {
    let parameters = [ParameterValue::Int32(retention_days), ParameterValue::Int64(batch)];
    count(db, FORGET_FINAL_CALLS, &parameters)
}
