//! The sealed credential cache (`credential_cache`). The store only moves opaque bytes; the
//! component that owns the credential seals and opens them.

use spin_sdk::pg4::{Connection, DbValue, ParameterValue};

use crate::StoreError;
use crate::rows::{first_column, one_row};

/// The sealed credential under $1 that is still valid for at least $2 seconds, or NULL. A scalar
/// subquery over the primary key, so a cache miss is one row too (see `rows.rs`).
pub(crate) const CACHED_CREDENTIAL: &str = "SELECT (SELECT sealed FROM credential_cache
                 WHERE cache_key = $1 AND expires_at > now() + make_interval(secs => $2::float8)) AS sealed";

/// A sealed credential that is still valid for at least `margin_seconds`.
pub fn cached_credential(db: &Connection, key: &str, margin_seconds: f64) -> Result<Option<Vec<u8>>, StoreError> {
    let row = one_row(
        db,
        CACHED_CREDENTIAL,
        &[ParameterValue::Str(key.to_owned()), ParameterValue::Floating64(margin_seconds)],
    )?;
    match first_column(row, CACHED_CREDENTIAL)? {
        DbValue::Binary(bytes) => Ok(Some(bytes)),
        DbValue::DbNull => Ok(None),
        other => Err(StoreError::Unexpected(format!("credential_cache.sealed decoded as {other:?}"))),
    }
}

/// Stores (or replaces) a sealed credential that expires in `ttl_seconds`.
pub fn cache_credential(db: &Connection, key: &str, sealed: &[u8], ttl_seconds: f64) -> Result<(), StoreError> {
    db.execute(
        "INSERT INTO credential_cache (cache_key, sealed, expires_at)
         VALUES ($1, $2, now() + make_interval(secs => $3::float8))
         ON CONFLICT (cache_key) DO UPDATE
            SET sealed = EXCLUDED.sealed, expires_at = EXCLUDED.expires_at, updated_at = now()",
        &[
            ParameterValue::Str(key.to_owned()),
            ParameterValue::Binary(sealed.to_vec()),
            ParameterValue::Floating64(ttl_seconds),
        ],
    )?;
    Ok(())
}

/// Forgets a credential the service refused, so no other request reuses it.
pub fn forget_credential(db: &Connection, key: &str) -> Result<(), StoreError> {
    db.execute("DELETE FROM credential_cache WHERE cache_key = $1", &[ParameterValue::Str(key.to_owned())])?;
    Ok(())
}
