//! API keys (`api_keys`; docs/keys.md): what a presented key may do. Keys are made, listed and
//! revoked by the CLI (`gatehouse keys`), never by a component.

use gatehouse_domain::keys::Grant;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::StoreError;
use crate::rows::optional;

/// The grant of the valid key whose SHA-256 is $1, or NULL: a scalar subquery over the unique
/// hash, so an unknown or revoked key is one row too (see `rows.rs`).
pub(crate) const KEY_GRANT: &str =
    "SELECT (SELECT jsonb_build_object('key', prefix, 'tenant', tenant_id, 'scopes', to_jsonb(scopes))
                 FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL) AS grant";

/// What the key hashed to `hash` may do, or `None` for a key that is unknown or revoked.
pub fn key_grant(db: &Connection, hash: &[u8; 32]) -> Result<Option<Grant>, StoreError> {
    optional(db, KEY_GRANT, &[ParameterValue::Binary(hash.to_vec())])
}
