//! Reading results. Every statement the store sends through `query` answers EXACTLY ONE row,
//! and this module is the one place that reads it and says so when it does not.
//!
//! Why one row, always: Spin 4.0.x's PostgreSQL host never answers a `query` whose result has
//! zero rows (spinframework/spin issue 3671, fixed on main by PR 3673, in no release yet): it
//! waits for the column list that only a first row brings, and the request hangs. The
//! application runs on every Spin since 3.4 (3.6 and 4.0.x tested, docs/deploying.md), so no
//! statement may come back empty:
//! - a lookup is a scalar subquery, `SELECT (SELECT col FROM t WHERE ...) AS col`, which is
//!   NULL when nothing matches: a NULL column means "not found";
//! - a conditional transition returns its before/after as scalar subqueries over its CTEs
//!   (`sql/calls/*.sql`), still one statement, so still atomic;
//! - a list is one jsonb array, `COALESCE(jsonb_agg(...), '[]'::jsonb)`.
//!
//! `execute` (no result set) is not affected and is used as before.

use serde::de::DeserializeOwned;
use spin_sdk::pg4::{Connection, DbValue, ParameterValue};

use crate::StoreError;

/// A text parameter.
pub(crate) fn text(value: &str) -> ParameterValue {
    ParameterValue::Str(value.to_owned())
}

/// A text parameter, SQL NULL for `None`.
pub(crate) fn optional_text(value: Option<&str>) -> ParameterValue {
    value.map_or(ParameterValue::DbNull, text)
}

/// A jsonb value, or `None` for SQL NULL.
pub(crate) fn decode<T: DeserializeOwned>(value: &DbValue) -> Result<Option<T>, StoreError> {
    match value {
        DbValue::DbNull => Ok(None),
        DbValue::Jsonb(bytes) => serde_json::from_slice(bytes)
            .map(Some)
            .map_err(|e| StoreError::Unexpected(format!("decoding a query result: {e}"))),
        other => Err(StoreError::Unexpected(format!("expected jsonb, got {other:?}"))),
    }
}

/// Runs a statement written to answer exactly one row, and hands back its columns.
pub(crate) fn one_row(db: &Connection, sql: &str, params: &[ParameterValue]) -> Result<Vec<DbValue>, StoreError> {
    exactly_one(db.query(sql, params)?.rows, sql)
}

/// The first column of the single row, decoded; `None` when it is NULL (nothing matched).
pub(crate) fn optional<T: DeserializeOwned>(
    db: &Connection,
    sql: &str,
    params: &[ParameterValue],
) -> Result<Option<T>, StoreError> {
    decode(&first_column(one_row(db, sql, params)?, sql)?)
}

/// The first column of the single row as a count (`count(*)` is an int8), 0 for SQL NULL.
pub(crate) fn count(db: &Connection, sql: &str, params: &[ParameterValue]) -> Result<i64, StoreError> {
    match first_column(one_row(db, sql, params)?, sql)? {
        DbValue::Int64(count) => Ok(count),
        DbValue::DbNull => Ok(0),
        other => Err(StoreError::Unexpected(format!("expected a count, got {other:?}"))),
    }
}

/// The first column of a row; a row without columns is a statement out of step with its reader.
pub(crate) fn first_column(row: Vec<DbValue>, sql: &str) -> Result<DbValue, StoreError> {
    row.into_iter()
        .next()
        .ok_or_else(|| StoreError::Unexpected(format!("the statement answered a row without columns: {}", head(sql))))
}

/// The one row of a result. Zero rows (which would have hung Spin 4.0.x before reaching here)
/// or several mean the statement broke the one-row convention: a bug, named in the error.
fn exactly_one(rows: Vec<Vec<DbValue>>, sql: &str) -> Result<Vec<DbValue>, StoreError> {
    let count = rows.len();
    let mut rows = rows.into_iter();
    match (rows.next(), count) {
        (Some(row), 1) => Ok(row),
        _ => Err(StoreError::Unexpected(format!(
            "the statement answered {count} rows, not exactly one (see gatehouse-store rows.rs): {}",
            head(sql)
        ))),
    }
}

/// The statement as an error message quotes it.
fn head(sql: &str) -> String {
    gatehouse_domain::sql::statement_excerpt(sql, 160)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    const SQL: &str = "-- A header comment.\nSELECT (SELECT x\n   FROM t WHERE id = $1) AS x";

    #[test]
    fn one_row_is_the_answer() {
        let row = exactly_one(vec![vec![DbValue::Int32(7)]], SQL).map_err(|e| e.to_string());
        assert!(matches!(row.as_deref(), Ok([DbValue::Int32(7)])), "{row:?}");
    }

    #[test]
    fn no_row_or_several_is_a_clear_error() {
        for rows in [vec![], vec![vec![DbValue::DbNull], vec![DbValue::DbNull]]] {
            let count = rows.len();
            let message = exactly_one(rows, SQL).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(&format!("answered {count} rows, not exactly one")), "{message}");
            assert!(message.ends_with("SELECT (SELECT x FROM t WHERE id = $1) AS x"), "{message}");
        }
    }

    #[test]
    fn a_row_without_columns_is_an_error_and_null_is_not_found() {
        assert!(first_column(vec![], SQL).is_err());
        assert_eq!(decode::<serde_json::Value>(&DbValue::DbNull).map_err(|e| e.to_string()), Ok(None));
    }

    /// Every statement sent through `query`, by name.
    fn queried() -> Vec<(&'static str, &'static str)> {
        let mut statements = vec![
            ("credentials::CACHED_CREDENTIAL", crate::credentials::CACHED_CREDENTIAL),
            ("keys::KEY_GRANT", crate::keys::KEY_GRANT),
            ("keys::TENANT_LIMIT", crate::keys::TENANT_LIMIT),
            ("keys::TENANT_CALLBACKS", crate::keys::TENANT_CALLBACKS),
            ("records::SESSION_CONTEXT_GET", crate::records::SESSION_CONTEXT_GET),
            ("health::PING", crate::health::PING),
            ("sql/session_context_view.sql", include_str!("sql/session_context_view.sql")),
            ("sql/history/page.sql", include_str!("sql/history/page.sql")),
            ("sql/history/stats.sql", include_str!("sql/history/stats.sql")),
            ("sql/history/fold_rollups.sql", crate::history::FOLD_ROLLUPS),
            ("sql/audit/calls.sql", crate::audit::CALLS),
            ("sql/audit/callbacks.sql", crate::audit::CALLBACKS),
            ("sql/contract/spend_nonce.sql", crate::contract::SPEND_NONCE),
            ("sql/contract/forget_nonces.sql", crate::contract::FORGET_NONCES),
            ("sql/contract/forget_sdk_calls.sql", crate::contract::FORGET_SDK_CALLS),
            ("sql/contract/claim.sql", crate::contract::CLAIM),
            ("sql/retention/keep_partitions.sql", crate::retention::KEEP_PARTITIONS),
            ("sql/retention/forget_final_calls.sql", crate::retention::FORGET_FINAL_CALLS),
        ];
        statements.extend(crate::calls::STATEMENTS.iter().map(|(file, sql)| (*file, *sql)));
        statements
    }

    /// The SQL files that go through `execute`, which has no result set to be empty.
    const EXECUTED: &[&str] = &["sql/history/record.sql"];

    /// The statement at parenthesis depth 0, upper-cased, with comments, string literals and
    /// everything in parentheses blanked; byte offsets are those of `sql`.
    fn top_level(sql: &str) -> String {
        let mut out = String::with_capacity(sql.len());
        let (mut depth, mut in_comment, mut in_string) = (0usize, false, false);
        let mut chars = sql.chars().peekable();
        while let Some(c) = chars.next() {
            let keep = if in_comment {
                in_comment = c != '\n';
                false
            } else if in_string {
                in_string = c != '\'';
                false
            } else {
                match c {
                    '-' if chars.peek() == Some(&'-') => in_comment = true,
                    '\'' => in_string = true,
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                depth == 0 && !in_comment && !in_string && c != ')'
            };
            match keep {
                true => out.push(c.to_ascii_uppercase()),
                false => out.extend(std::iter::repeat_n(' ', c.len_utf8())),
            }
        }
        out
    }

    /// A cheap check of the shape, against a regression to `SELECT ... FROM t WHERE ...`: the
    /// outermost SELECT must read from nothing (its columns are scalar subqueries) or be an
    /// aggregate over a whole relation, which answers one row even over none.
    fn may_answer_no_row(sql: &str) -> bool {
        let top = top_level(sql);
        let Some(at) = top.rfind("SELECT") else { return true };
        let words: Vec<&str> = top[at..].split_whitespace().collect();
        if !words.contains(&"FROM") {
            return false;
        }
        let aggregate = ["_agg(", "count("].iter().any(|f| sql[at..].contains(f));
        let filtered = ["WHERE", "GROUP", "HAVING", "LIMIT", "OFFSET", "FETCH", "UNION", "JOIN"]
            .iter()
            .any(|word| words.contains(word));
        !aggregate || filtered
    }

    #[test]
    fn every_queried_statement_has_a_one_row_shape() {
        for (name, sql) in queried() {
            assert!(!may_answer_no_row(sql), "{name} may answer no row");
        }
    }

    #[test]
    fn the_shape_check_refuses_a_bare_lookup_or_list() {
        for bare in [
            "SELECT tool_call_json(c) FROM tool_calls c WHERE c.tool_call_id = $1",
            "-- (header)\nWITH x AS (SELECT 1) SELECT count(*) FROM x GROUP BY 1",
            "SELECT effect_id FROM fixture_tool_effects WHERE tool_call_id = ')'",
        ] {
            assert!(may_answer_no_row(bare), "{bare}");
        }
        assert!(!may_answer_no_row("SELECT (SELECT x FROM t WHERE id = $1) AS x"));
        assert!(!may_answer_no_row("WITH c AS (DELETE FROM t RETURNING t) SELECT COALESCE(jsonb_agg(c), '[]') FROM c"));
    }

    /// A new SQL file must be listed above, so the shape check sees it.
    #[test]
    fn every_sql_file_is_checked() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = BTreeSet::new();
        let mut dirs = vec![root.join("sql")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "sql") {
                    let relative = path.strip_prefix(&root).map(|p| p.to_string_lossy().replace('\\', "/"));
                    files.insert(relative.unwrap_or_default());
                }
            }
        }
        let known: BTreeSet<String> = queried()
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .chain(EXECUTED.iter().map(|f| (*f).to_owned()))
            .collect();
        let unchecked: Vec<&String> = files.iter().filter(|f| !known.contains(*f)).collect();
        assert!(files.len() > 10 && unchecked.is_empty(), "not listed in rows.rs tests: {unchecked:?}");
    }
}
