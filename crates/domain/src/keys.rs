//! API keys and their scopes (docs/keys.md; docs/architecture.md, "Keys and scopes").
//!
//! A key is `ghk_` and eight hex digits (its prefix, the public name lists and revocations use),
//! `_`, and 32 random bytes in unpadded base64url: 56 characters, with no comma or space, so it
//! is a valid bearer token. The database keeps its SHA-256, never the key: a key carries 256 bits
//! of randomness, so nothing can be guessed from a fast hash. The `api_token` variable is not a
//! key of this kind; it stays the first tenant's admin key.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// What a key may do. Each public route needs one (docs/keys.md lists which).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Scope {
    #[serde(rename = "calls:write")]
    /// Create calls and act on them: correct, confirm, resume, cancel; the direct flows and MCP.
    CallsWrite,
    #[serde(rename = "calls:read")]
    /// Read calls: a call's status, a session's calls, the call list and its callbacks.
    CallsRead,
    #[serde(rename = "tools:read")]
    /// Read the tools: the list, each tool's executions and stats.
    ToolsRead,
    #[serde(rename = "admin")]
    /// Everything, including the operator's routes (`/voice-tools/sweep`).
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::CallsWrite, Scope::CallsRead, Scope::ToolsRead, Scope::Admin];

    /// The scope's name, as keys store it and errors name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::CallsWrite => "calls:write",
            Scope::CallsRead => "calls:read",
            Scope::ToolsRead => "tools:read",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|scope| scope.as_str() == name)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who a request is: the tenant its key belongs to, the key (none for `api_token`), and what
/// the key may do.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    pub tenant: String,
    /// The key's prefix, its public name; `None` for the `api_token` variable.
    pub key: Option<String>,
    pub scopes: Vec<Scope>,
    /// Whether the tenant has limits, so that a create checks them before asking the tool
    /// (docs/keys.md, "Limits"). Read with the key; not part of who the key is.
    #[serde(default, skip_serializing)]
    pub limited: bool,
    /// The hosts the tenant's callbacks may reach, as it named them (`None`: none named), read
    /// with the key so a create checks its callback URL without another statement. The first
    /// tenant's are the deployment's `callback_allowed_hosts` instead (`tenant_callbacks`).
    #[serde(default, skip_serializing)]
    pub callback_hosts: Option<String>,
}

/// The tenant `api_token` belongs to, which the migration creates.
pub const DEFAULT_TENANT: &str = "default";
/// How the status history names a change made with `api_token`.
pub const API_TOKEN_NAME: &str = "api_token";

impl Grant {
    /// The `api_token` variable: the first tenant's admin.
    pub fn api_token() -> Grant {
        Grant {
            tenant: DEFAULT_TENANT.to_owned(),
            key: None,
            scopes: vec![Scope::Admin],
            limited: false,
            callback_hosts: None,
        }
    }

    /// How the status history names the key that made a change: its prefix, or `api_token`.
    pub fn key_name(&self) -> &str {
        self.key.as_deref().unwrap_or(API_TOKEN_NAME)
    }

    /// Whether the grant may run the deployment's own maintenance (`/voice-tools/sweep`), which
    /// touches every tenant's calls: an admin of the first tenant, the operator's.
    pub fn is_operator(&self) -> bool {
        self.tenant == DEFAULT_TENANT && self.allows(Scope::Admin)
    }

    /// Whether the grant covers `needed`: `admin` covers every scope, and `calls:write` covers
    /// `calls:read` (a relay that acts on its calls reads them).
    pub fn allows(&self, needed: Scope) -> bool {
        self.scopes.iter().any(|&held| {
            held == needed || held == Scope::Admin || (held == Scope::CallsWrite && needed == Scope::CallsRead)
        })
    }
}

/// `ghk_`: the start of every key.
pub const KEY_MARK: &str = "ghk_";
/// A key's length in characters.
pub const KEY_LEN: usize = 4 + 8 + 1 + 43;

/// A new key from its random parts: its prefix's 4 bytes and its secret's 32.
pub fn compose_key(prefix: [u8; 4], secret: [u8; 32]) -> String {
    format!("{KEY_MARK}{}_{}", hex::encode(prefix), URL_SAFE_NO_PAD.encode(secret))
}

/// The prefix of a well-formed key (`ghk_` and eight hex digits), or `None` for anything that
/// is not a key of this kind.
pub fn key_prefix(key: &str) -> Option<&str> {
    let well_formed = key.len() == KEY_LEN
        && key.starts_with(KEY_MARK)
        && key[4..12].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && key.as_bytes()[12] == b'_'
        && key[13..].bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    well_formed.then(|| &key[..12])
}

/// What the database keeps of a key.
pub fn key_hash(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_its_prefix_and_43_characters_of_secret() {
        let key = compose_key([0xde, 0xad, 0xbe, 0xef], [0xff; 32]);
        assert_eq!(key.len(), KEY_LEN);
        assert!(key.starts_with("ghk_deadbeef_"));
        assert_eq!(key_prefix(&key), Some("ghk_deadbeef"));
        assert!(!key.contains(['=', '+', '/', ',', ' ']));
    }

    #[test]
    fn anything_else_is_not_a_key() {
        let key = compose_key([1, 2, 3, 4], [7; 32]);
        assert_eq!(key_prefix(&key[..KEY_LEN - 1]), None);
        assert_eq!(key_prefix(&format!("{key}x")), None);
        assert_eq!(key_prefix(&key.replace("ghk_", "ghx_")), None);
        assert_eq!(key_prefix(&key.replace("ghk_01020304", "ghk_0102030G")), None);
        assert_eq!(key_prefix("dev-token"), None);
    }

    #[test]
    fn scopes_cover_what_they_say() {
        let relay = Grant {
            tenant: "t".into(),
            key: Some("ghk_00000000".into()),
            scopes: vec![Scope::CallsWrite],
            limited: false,
            callback_hosts: None,
        };
        assert!(relay.allows(Scope::CallsWrite) && relay.allows(Scope::CallsRead));
        assert!(!relay.allows(Scope::ToolsRead) && !relay.allows(Scope::Admin));
        let viewer = Grant { scopes: vec![Scope::CallsRead, Scope::ToolsRead], ..relay };
        assert!(viewer.allows(Scope::CallsRead) && !viewer.allows(Scope::CallsWrite));
        assert!(Scope::ALL.into_iter().all(|scope| Grant::api_token().allows(scope)));
        assert!(Scope::ALL.into_iter().all(|scope| Scope::parse(scope.as_str()) == Some(scope)));
    }
}
