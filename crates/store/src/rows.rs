//! Reading results: every query here answers one jsonb value that the database built, so
//! decoding is the same few steps everywhere.

use serde::de::DeserializeOwned;
use spin_sdk::pg4::{Connection, DbValue, ParameterValue};

use crate::StoreError;

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

/// Runs a statement that answers exactly one row, and hands back its columns.
pub(crate) fn one_row(db: &Connection, sql: &str, params: &[ParameterValue]) -> Result<Vec<DbValue>, StoreError> {
    let rows = db.query(sql, params)?;
    rows.rows.into_iter().next().ok_or_else(|| StoreError::Unexpected("the statement returned no row".into()))
}

/// The first column of the first row, decoded; `None` when there is no row or it is NULL.
pub(crate) fn optional<T: DeserializeOwned>(
    db: &Connection,
    sql: &str,
    params: &[ParameterValue],
) -> Result<Option<T>, StoreError> {
    let rows = db.query(sql, params)?;
    match rows.rows.first().and_then(|row| row.first()) {
        Some(value) => decode(value),
        None => Ok(None),
    }
}
