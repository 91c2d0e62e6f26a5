//! Signed service calls between hosts: the tool contract and the executor hand-off, signed
//! with `contract_secret` (see `gatehouse_domain::service_auth`). The receiving side checks
//! them in `gatehouse_http::require_service_request`.

use std::time::{SystemTime, UNIX_EPOCH};

use gatehouse_domain::{ApiError, service_auth, signing};
use spin_sdk::http::Method;
use spin_sdk::variables;

/// The variable holding the key that signs service requests crossing hosts: the tool
/// contract and the executor hand-off (see `gatehouse_domain::service_auth`).
const CONTRACT_SECRET: &str = "contract_secret";
/// During a rotation, the key being replaced: still accepted, and still signed with, so hosts
/// that have not been given the new key yet keep working (docs/keys.md).
const CONTRACT_SECRET_PREVIOUS: &str = "contract_secret_previous";

/// The signature header for a service request to `url`, when `contract_secret` is set: one
/// signature per key in [`contract_secrets`], by the one recipe (`gatehouse_domain::signing`),
/// with a fresh nonce. A service request carries no `Idempotency-Key`, so none is bound.
pub fn service_signature(method: &Method, url: &str, body: &[u8]) -> Result<Option<(&'static str, String)>, ApiError> {
    let Some(secrets) = contract_secrets()? else { return Ok(None) };
    let secrets: Vec<&[u8]> = secrets.iter().map(|s| s.as_bytes()).collect();
    let nonce = crate::new_token();
    let method = method.to_string();
    let signature = service_auth::sign_with_each(&secrets, unix_now(), &nonce, &method, &signing::target_of(url), body);
    Ok(Some((service_auth::SIGNATURE_HEADER, signature)))
}

/// The keys service calls are signed and checked with: `contract_secret`, then
/// `contract_secret_previous` during a rotation; `None` when the operator set none.
pub fn contract_secrets() -> Result<Option<Vec<String>>, ApiError> {
    let secret = variables::get(CONTRACT_SECRET)
        .map_err(|e| ApiError::internal().with_detail(format!("reading the {CONTRACT_SECRET} variable: {e:?}")))?;
    if secret.is_empty() {
        return Ok(None);
    }
    Ok(Some(std::iter::once(secret).chain(previous(CONTRACT_SECRET_PREVIOUS)).collect()))
}

/// A rotation's previous key, if the operator set one. A manifest from before rotations
/// declares no such variable; that reads as none, which accepts less, never more.
fn previous(variable: &str) -> Option<String> {
    variables::get(variable).ok().filter(|secret| !secret.is_empty())
}

/// Seconds since the Unix epoch, for signature timestamps.
pub fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}
