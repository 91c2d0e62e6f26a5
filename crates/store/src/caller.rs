//! Whom a statement runs for (docs/architecture.md, "Tenants").

use gatehouse_domain::keys::Grant;
use spin_sdk::pg4::ParameterValue;

/// Whom a statement runs for.
#[derive(Debug, Clone, Copy)]
pub enum Caller<'a> {
    /// A request with a key: it sees and changes only its tenant's rows (another tenant's call
    /// is not found, exactly like a call that does not exist), and a transition it makes names
    /// the key in the call's status history.
    Key(&'a Grant),
    /// Gatehouse itself: the executor, the sweeper, a tool acting for the call it was handed.
    /// It reaches a call by its id whatever the tenant.
    Gatehouse,
}

impl Caller<'_> {
    /// The tenant a statement is confined to, or NULL for Gatehouse's own paths.
    pub(crate) fn tenant(self) -> ParameterValue {
        match self {
            Caller::Key(grant) => ParameterValue::Str(grant.tenant.clone()),
            Caller::Gatehouse => ParameterValue::DbNull,
        }
    }

    /// The key a transition records, or NULL for Gatehouse's own transitions.
    pub(crate) fn key(self) -> ParameterValue {
        match self {
            Caller::Key(grant) => ParameterValue::Str(grant.key_name().to_owned()),
            Caller::Gatehouse => ParameterValue::DbNull,
        }
    }
}
