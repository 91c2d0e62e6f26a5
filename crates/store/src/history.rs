//! The per-tool execution history (docs/architecture.md, "Observability"): its rows, a tool's
//! executions page by page, and its stats, all computed by the database. A page and the stats
//! are the routes' answers as they stand, decoded as the caller's type for each.

use gatehouse_domain::{stats_partition_bounds, unix_seconds};
use serde::de::DeserializeOwned;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;
use crate::rows::{count, optional, optional_text, text};

const RECORD: &str = include_str!("sql/history/record.sql");
const PAGE: &str = include_str!("sql/history/page.sql");
const STATS: &str = include_str!("sql/history/stats.sql");
pub(crate) const FOLD_ROLLUPS: &str = include_str!("sql/history/fold_rollups.sql");

/// One operation a tool component performed, or was meant to: a `tool_executions` row
/// (docs/architecture.md, "The data model").
#[derive(Debug, Clone)]
pub struct ToolExecution<'a> {
    /// The tenant the work was for; `None` takes the call's, and for a row with no call the
    /// first tenant's.
    pub tenant: Option<&'a str>,
    pub tool: &'a str,
    pub component: &'a str,
    /// `None` when the row is written on the tool's behalf: the component's last known version.
    pub component_version: Option<&'a str>,
    pub operation: &'a str,
    pub tool_call_id: Option<&'a str>,
    /// Unix seconds, with fractions.
    pub started_at: f64,
    pub duration_ms: f64,
    /// `ok`, `rejected`, `failed`, `crashed` or `cancelled`.
    pub outcome: &'a str,
    pub error: Option<&'a str>,
    pub trace_id: Option<&'a str>,
}

pub fn record_tool_execution(db: &Connection, row: &ToolExecution<'_>) -> Result<(), StoreError> {
    let mut parameters = history_parameters(Some(row));
    parameters.push(optional_text(row.tenant));
    db.execute(RECORD, &parameters)?;
    Ok(())
}

/// A row's ten parameters, in the order of `record.sql` (and of the create's `insert.sql`,
/// which writes a handed-over `validate` row with the call, of the call's tenant); all NULL
/// for no row. The tenant is not among them: `record.sql` takes it after them.
pub(crate) fn history_parameters(row: Option<&ToolExecution<'_>>) -> Vec<ParameterValue> {
    let Some(row) = row else {
        return (0..10).map(|_| ParameterValue::DbNull).collect();
    };
    vec![
        text(row.tool),
        text(row.component),
        optional_text(row.component_version),
        text(row.operation),
        optional_text(row.tool_call_id),
        ParameterValue::Floating64(row.started_at),
        ParameterValue::Floating64(row.duration_ms),
        text(row.outcome),
        optional_text(row.error),
        optional_text(row.trace_id),
    ]
}

/// Where a page of executions starts: just after the row with this start and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionCursor {
    pub started_at_micros: i64,
    pub execution_id: i64,
}

impl ExecutionCursor {
    /// Reads the `next_cursor` a previous page answered (`<micros>_<id>`).
    pub fn parse(text: &str) -> Option<ExecutionCursor> {
        let (micros, id) = text.split_once('_')?;
        let started_at_micros = micros.parse().ok().filter(|m: &i64| (0..=crate::MAX_CURSOR_MICROS).contains(m))?;
        Some(ExecutionCursor { started_at_micros, execution_id: id.parse().ok().filter(|id: &i64| *id >= 0)? })
    }
}

/// Which of a tool's executions to list.
#[derive(Debug, Clone)]
pub struct ExecutionFilter<'a> {
    /// The tenant whose executions they are.
    pub tenant: &'a str,
    pub tool: &'a str,
    pub outcome: Option<&'a str>,
    /// An RFC 3339 timestamp, already checked.
    pub since: Option<&'a str>,
    pub after: Option<ExecutionCursor>,
    pub limit: u32,
}

/// `{tool, executions: [...], next_cursor}`: newest first; `next_cursor` is null on the last page.
pub fn tool_executions<T: DeserializeOwned>(db: &Connection, filter: &ExecutionFilter<'_>) -> Result<T, StoreError> {
    let cursor = filter.after;
    optional(
        db,
        PAGE,
        &[
            ParameterValue::Str(filter.tool.to_owned()),
            optional_text(filter.outcome),
            optional_text(filter.since),
            cursor.map_or(ParameterValue::DbNull, |c| ParameterValue::Int64(c.started_at_micros)),
            cursor.map_or(ParameterValue::DbNull, |c| ParameterValue::Int64(c.execution_id)),
            ParameterValue::Int64(i64::from(filter.limit)),
            text(filter.tenant),
        ],
    )?
    .ok_or_else(|| StoreError::Unexpected("the executions query returned nothing".into()))
}

/// A tool's stats over the tenant's executions of the last `window_seconds`, with the tool's name
/// and `window`, the span as the client wrote it.
pub fn tool_stats<T: DeserializeOwned>(
    db: &Connection,
    tenant: &str,
    tool: &str,
    window: &str,
    window_seconds: f64,
) -> Result<T, StoreError> {
    let (window_start, window_end) = stats_partition_bounds(unix_seconds(), window_seconds);
    let parameters = [
        text(tool),
        ParameterValue::Floating64(window_seconds),
        text(window),
        text(tenant),
        ParameterValue::Floating64(window_start),
        ParameterValue::Floating64(window_end),
    ];
    optional(db, STATS, &parameters)?.ok_or_else(|| StoreError::Unexpected("the stats query returned nothing".into()))
}

/// Adds at most `batch` executions from the inbox to the rollups (migration V20); how many it
/// added.
pub fn fold_execution_rollups(db: &Connection, batch: i64) -> Result<i64, StoreError> {
    count(db, FOLD_ROLLUPS, &[ParameterValue::Int64(batch)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_a_page_answered() {
        let cursor = ExecutionCursor::parse("1763840000123456_42");
        assert_eq!(cursor, Some(ExecutionCursor { started_at_micros: 1_763_840_000_123_456, execution_id: 42 }));
        for bad in ["", "12", "a_b", "12_", "_12", "1.5_2"] {
            assert_eq!(ExecutionCursor::parse(bad), None, "{bad}");
        }
    }
}
