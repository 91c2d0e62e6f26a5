//! Each tenant's callbacks: the hosts they may reach and the secrets that sign them
//! (docs/architecture.md, "Callbacks"; docs/keys.md, "Each tenant's callbacks").
//!
//! A tenant's callback secret is derived from the deployment's `callback_secret` (a Spin
//! variable, the only place a secret lives) and the tenant's id and secret generation: HMAC is a
//! pseudo-random function, so knowing one tenant's secret tells nothing of another's, and no
//! secret is stored in the database. The first tenant keeps `callback_secret` itself, so a
//! deployment with one relay changes nothing on upgrade. Likewise the first tenant's hosts are
//! the deployment's `callback_allowed_hosts`; every other tenant names its own, and until it
//! does its calls can have no callback at all.

use hmac::Mac;
use serde::{Deserialize, Serialize};

use crate::CallbackAllowlist;
use crate::keys::DEFAULT_TENANT;

/// What the tenants row holds about a tenant's callbacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantCallbacks {
    /// `callback_allowed_hosts`' syntax; `None` for a tenant that has named none.
    pub allowed_hosts: Option<String>,
    /// The generation of the tenant's secret, 1 until its first rotation.
    pub secret_generation: i32,
    /// During a rotation, the generation before: callbacks are signed with both.
    pub previous_generation: Option<i32>,
}

/// A tenant that has named no hosts and never rotated its secret: what migration V28 gives
/// every row, and what a tenant without a row is taken to be.
impl Default for TenantCallbacks {
    fn default() -> TenantCallbacks {
        TenantCallbacks { allowed_hosts: None, secret_generation: 1, previous_generation: None }
    }
}

impl TenantCallbacks {
    /// The hosts `tenant`'s callbacks may reach: the first tenant's are `deployment_hosts`.
    pub fn allowlist(&self, tenant: &str, deployment_hosts: &str) -> CallbackAllowlist {
        if tenant == DEFAULT_TENANT {
            CallbackAllowlist::parse(deployment_hosts)
        } else {
            CallbackAllowlist::parse(self.allowed_hosts.as_deref().unwrap_or_default())
        }
    }

    /// The secrets `tenant`'s callbacks are signed with, one signature each, newest first:
    /// each of the deployment's `masters` (`callback_secret`, then `callback_secret_previous`
    /// during its rotation) for each of the tenant's generations.
    pub fn secrets(&self, tenant: &str, masters: &[String]) -> Vec<String> {
        if tenant == DEFAULT_TENANT && self.secret_generation <= 1 && self.previous_generation.is_none() {
            return masters.to_vec();
        }
        let generations = std::iter::once(self.secret_generation).chain(self.previous_generation);
        generations
            .flat_map(|generation| masters.iter().map(move |master| tenant_secret(master, tenant, generation)))
            .collect()
    }
}

/// The callback secret of `tenant` at `generation`, derived from the deployment's `master`: 64
/// lowercase hex digits. The first tenant's first generation is `master` itself.
pub fn tenant_secret(master: &str, tenant: &str, generation: i32) -> String {
    if tenant == DEFAULT_TENANT && generation <= 1 {
        return master.to_owned();
    }
    let mut mac = crate::signing::keyed(master.as_bytes());
    mac.update(format!("gatehouse tenant callback secret\n{tenant}\n{generation}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_tenant_keeps_the_deployments_secret_and_hosts() {
        let settings = TenantCallbacks::default();
        let masters = vec!["new".to_owned(), "old".to_owned()];
        assert_eq!(settings.secrets(DEFAULT_TENANT, &masters), masters);
        let hosts = settings.allowlist(DEFAULT_TENANT, "relay.example");
        assert!(hosts.check("https://relay.example/cb").is_ok());
    }

    #[test]
    fn every_other_tenant_has_a_secret_and_hosts_of_its_own() {
        let acme = tenant_secret("master", "acme", 1);
        assert_eq!(acme.len(), 64);
        assert_ne!(acme, tenant_secret("master", "globex", 1), "another tenant");
        assert_ne!(acme, tenant_secret("master", "acme", 2), "another generation");
        assert_ne!(acme, tenant_secret("other", "acme", 1), "another deployment secret");
        assert_eq!(acme, tenant_secret("master", "acme", 1), "the same every time");

        let none = TenantCallbacks::default();
        assert!(
            none.allowlist("acme", "relay.example").check("https://relay.example/cb").is_err(),
            "not the deployment's"
        );
        let own = TenantCallbacks { allowed_hosts: Some("relay.acme.example".into()), ..none.clone() };
        assert!(own.allowlist("acme", "").check("https://relay.acme.example/cb").is_ok());
    }

    #[test]
    fn a_rotation_signs_with_both_generations() {
        let rotating = TenantCallbacks { allowed_hosts: None, secret_generation: 2, previous_generation: Some(1) };
        let masters = vec!["m".to_owned()];
        assert_eq!(rotating.secrets("acme", &masters), [tenant_secret("m", "acme", 2), tenant_secret("m", "acme", 1)]);
        // The first tenant's rotation leaves the deployment's secret for the derived one.
        assert_eq!(rotating.secrets(DEFAULT_TENANT, &masters), [tenant_secret("m", DEFAULT_TENANT, 2), "m".to_owned()]);
    }
}
