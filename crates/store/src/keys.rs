//! API keys (`api_keys`; docs/keys.md): what a presented key may do. Keys are made, listed and
//! revoked by the CLI (`gatehouse keys`), never by a component.

use gatehouse_domain::keys::Grant;
use gatehouse_domain::tenant_callbacks::TenantCallbacks;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::rows::optional;
use crate::{Limit, StoreError};

/// The grant of the valid key whose SHA-256 is $1, with whether its tenant has limits, or NULL:
/// a scalar subquery over the unique hash, so an unknown or revoked key is one row too (see
/// `rows.rs`).
pub(crate) const KEY_GRANT: &str =
    "SELECT (SELECT jsonb_build_object('key', k.prefix, 'tenant', k.tenant_id, 'scopes', to_jsonb(k.scopes),
                                       'limited', t.max_pending_calls IS NOT NULL OR t.creates_per_second IS NOT NULL,
                                       'callback_hosts', t.callback_allowed_hosts)
                 FROM api_keys k JOIN tenants t ON t.id = k.tenant_id
                WHERE k.key_hash = $1 AND k.revoked_at IS NULL) AS grant";

/// What the tenants row says of `$1`'s callbacks (`TenantCallbacks`), or NULL for no such tenant.
pub(crate) const TENANT_CALLBACKS: &str = "SELECT (SELECT jsonb_build_object('allowed_hosts', t.callback_allowed_hosts,
                                       'secret_generation', t.callback_secret_generation,
                                       'previous_generation', t.callback_secret_previous_generation)
                 FROM tenants t WHERE t.id = $1) AS callbacks";

/// Which of the tenant's limits a create would meet now, read without a lock and without
/// using the tenant's rate (`tenant_limit_now`, migration V19).
pub(crate) const TENANT_LIMIT: &str = "SELECT to_jsonb(tenant_limit_now($1)) AS limit_met";

/// What the key hashed to `hash` may do, or `None` for a key that is unknown or revoked.
pub fn key_grant(db: &Connection, hash: &[u8; 32]) -> Result<Option<Grant>, StoreError> {
    optional(db, KEY_GRANT, &[ParameterValue::Binary(hash.to_vec())])
}

/// Where `tenant`'s callbacks may go and what signs them, or `None` for no such tenant.
pub fn tenant_callbacks(db: &Connection, tenant: &str) -> Result<Option<TenantCallbacks>, StoreError> {
    optional(db, TENANT_CALLBACKS, &[ParameterValue::Str(tenant.to_owned())])
}

/// The tenant's limit a create would meet now, if any: checked before the tool is asked to
/// validate, so that a tenant past its limits costs little. The create's insert checks again,
/// and that check is the one that holds.
pub fn tenant_limit(db: &Connection, tenant: &str) -> Result<Option<Limit>, StoreError> {
    optional(db, TENANT_LIMIT, &[ParameterValue::Str(tenant.to_owned())])
}
