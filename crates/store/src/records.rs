//! Append-only callback delivery attempts, and the session context tools leave behind.

use gatehouse_domain::SessionOf;
use serde_json::Value;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;

/// One attempt to deliver a callback.
#[derive(Debug, Clone)]
pub struct CallbackAttempt<'a> {
    /// The tenant of the call.
    pub tenant: &'a str,
    pub tool_call_id: &'a str,
    pub kind: &'a str,
    pub url: &'a str,
    pub attempt: i32,
    pub status_code: Option<i32>,
    pub error: Option<&'a str>,
    pub duration_ms: f64,
}

/// An audit row: it commits without waiting for the disk (`asynchronous_commit()`, migration V12).
pub fn record_callback_attempt(db: &Connection, row: &CallbackAttempt<'_>) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO callback_attempts (tool_call_id, kind, url, attempt, status_code, error, duration_ms, tenant_id)
         SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE asynchronous_commit()",
        &[
            ParameterValue::Str(row.tool_call_id.to_owned()),
            ParameterValue::Str(row.kind.to_owned()),
            ParameterValue::Str(row.url.to_owned()),
            ParameterValue::Int32(row.attempt),
            row.status_code.map_or(ParameterValue::DbNull, ParameterValue::Int32),
            row.error.map_or(ParameterValue::DbNull, |e| ParameterValue::Str(e.to_owned())),
            ParameterValue::Floating64(row.duration_ms),
            ParameterValue::Str(row.tenant.to_owned()),
        ],
    )?;
    Ok(())
}

/// The unexpired value under ($3 tenant, $1 session, $2 key), or NULL. A scalar subquery over
/// the primary key, so a missing key is one row too (see `rows.rs`).
pub(crate) const SESSION_CONTEXT_GET: &str = "SELECT (SELECT context_value FROM session_context
                 WHERE tenant_id = $3 AND session_id = $1 AND context_key = $2 AND expires_at > now())
           AS context_value";

/// A session context value that has not expired.
pub fn session_context_get(db: &Connection, session: SessionOf<'_>, key: &str) -> Result<Option<Value>, StoreError> {
    crate::rows::optional(
        db,
        SESSION_CONTEXT_GET,
        &[
            ParameterValue::Str(session.session_id.as_str().to_owned()),
            ParameterValue::Str(key.to_owned()),
            ParameterValue::Str(session.tenant.to_owned()),
        ],
    )
}

/// Stores (or replaces) a session context value for `ttl_seconds`. For a tool's `execute`: it
/// commits without waiting for the disk (`asynchronous_commit()`, migration V12), since the
/// call's completion, committed after it, puts it on disk first.
pub fn session_context_put(
    db: &Connection,
    session: SessionOf<'_>,
    key: &str,
    value: &Value,
    ttl_seconds: f64,
) -> Result<(), StoreError> {
    let bytes = serde_json::to_vec(value).map_err(|e| StoreError::Unexpected(format!("encoding context: {e}")))?;
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value, created_at, expires_at, tenant_id)
         SELECT $1, $2, $3, now(), now() + make_interval(secs => $4::float8), $5 WHERE asynchronous_commit()
         ON CONFLICT (tenant_id, session_id, context_key) DO UPDATE
            SET context_value = EXCLUDED.context_value, created_at = EXCLUDED.created_at,
                expires_at = EXCLUDED.expires_at",
        &[
            ParameterValue::Str(session.session_id.as_str().to_owned()),
            ParameterValue::Str(key.to_owned()),
            ParameterValue::Jsonb(bytes),
            ParameterValue::Floating64(ttl_seconds),
            ParameterValue::Str(session.tenant.to_owned()),
        ],
    )?;
    Ok(())
}

/// Deletes expired session context rows; returns how many.
pub fn purge_expired_session_context(db: &Connection) -> Result<u64, StoreError> {
    Ok(db.execute("DELETE FROM session_context WHERE expires_at <= now()", &[])?)
}
