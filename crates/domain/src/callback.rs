//! Callbacks to the relay (docs/architecture.md, "Callbacks"): their payloads, their
//! signature, and how a relay's answer at a gate is read.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Sha256;

use crate::{SessionId, Status, ToolCallId};

/// The header that carries `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`.
pub const SIGNATURE_HEADER: &str = "x-gatehouse-signature";

/// The header naming the tenant a callback is for, as its payload's `tenant` does: a relay
/// that serves several tenants picks the secret to verify with by it (and then checks the
/// payload says the same).
pub const TENANT_HEADER: &str = "x-gatehouse-tenant";

/// The kinds of callback; also stored with each delivery attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallbackKind {
    Progress,
    Checkpoint,
    Completion,
}

impl CallbackKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            CallbackKind::Progress => "progress",
            CallbackKind::Checkpoint => "checkpoint",
            CallbackKind::Completion => "completion",
        }
    }
}

/// The tenant a callback is for, as the payloads name it: a relay that serves one tenant
/// checks it beside the signature, which that tenant's own secret made (`tenant_callbacks`).
/// A payload from before tenants named none, and was the first tenant's.
fn first_tenant() -> String {
    crate::keys::DEFAULT_TENANT.to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressCallback {
    pub tool_call_id: ToolCallId,
    #[serde(default = "first_tenant")]
    pub tenant: String,
    pub intent_id: Option<String>,
    pub status: Status,
    pub progress: String,
    pub gate: String,
    pub cancellable: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_confirmation: bool,
    pub trace_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointCallback {
    pub tool_call_id: ToolCallId,
    #[serde(default = "first_tenant")]
    pub tenant: String,
    pub status: Status,
    pub checkpoint: String,
    pub message: String,
    pub resume_webhook: String,
    pub trace_id: Option<String>,
}

impl CheckpointCallback {
    pub fn ready_to_execute(
        tool_call_id: ToolCallId,
        tenant: String,
        message: String,
        trace_id: Option<String>,
    ) -> Self {
        let resume_webhook = format!("/resume-execution/{tool_call_id}");
        Self {
            tool_call_id,
            tenant,
            status: Status::Prepared,
            checkpoint: "ready_to_execute".into(),
            message,
            resume_webhook,
            trace_id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionCallback {
    pub tool_call_id: ToolCallId,
    #[serde(default = "first_tenant")]
    pub tenant: String,
    pub session_id: SessionId,
    pub status: Status,
    pub result: Option<Value>,
    pub voice_response: Option<String>,
    pub execution_time_ms: Option<i64>,
    /// True when the call stored session context the agent can fetch with
    /// `GET /get-session-context` (docs/architecture.md, "Vector search").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub context_available: bool,
    /// The `context_key` for `GET /get-session-context`, when there is context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_key: Option<String>,
    pub trace_id: Option<String>,
}

/// The signature header value for `body` sent at `unix_seconds`.
pub fn sign(secret: &[u8], unix_seconds: u64, body: &[u8]) -> String {
    sign_with_each(&[secret], unix_seconds, body)
}

/// The signature header value with one `v1` signature per secret, in order: during a rotation
/// the new secret's and the previous one's, so a receiver that knows either accepts it, as
/// Stripe's header carries a list (docs/keys.md, "Rotating the signing secrets").
pub fn sign_with_each(secrets: &[&[u8]], unix_seconds: u64, body: &[u8]) -> String {
    let mut header = format!("t={unix_seconds}");
    for secret in secrets {
        header.push_str(",v1=");
        header.push_str(&hex::encode(mac(secret, unix_seconds, body)));
    }
    header
}

/// Checks a signature header the way a relay should: the MAC must match, compared in
/// constant time, and the timestamp must be within `tolerance_seconds` of `now`, so a
/// captured callback cannot be replayed later.
pub fn verify(secret: &[u8], header: &str, body: &[u8], now: u64, tolerance_seconds: u64) -> bool {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", value)) => timestamp = value.parse::<u64>().ok(),
            Some(("v1", value)) => signatures.extend(hex::decode(value).ok()),
            _ => {}
        }
    }
    let Some(timestamp) = timestamp else { return false };
    if timestamp.abs_diff(now) > tolerance_seconds {
        return false;
    }
    signatures.iter().any(|signature| {
        let mut mac = keyed(secret);
        mac.update(format!("{timestamp}.").as_bytes());
        mac.update(body);
        mac.verify_slice(signature).is_ok()
    })
}

fn keyed(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts every key length"),
    }
}

fn mac(secret: &[u8], unix_seconds: u64, body: &[u8]) -> Vec<u8> {
    let mut mac = keyed(secret);
    mac.update(format!("{unix_seconds}.").as_bytes());
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
}

/// What the relay said at a gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayDecision {
    Continue,
    Cancel { reason: String },
}

impl RelayDecision {
    /// Reads the relay's answer at a gate that needs one. Only an explicit
    /// `{"continue": true}` continues: no answer, an error status, a body that is not JSON or
    /// anything else means cancel: a gate fails closed (docs/architecture.md, "Callbacks").
    pub fn at_gate(status: Option<u16>, body: &[u8]) -> RelayDecision {
        match status {
            None => return RelayDecision::cancel("the relay could not be reached"),
            Some(200..=299) => {}
            Some(code) => return RelayDecision::cancel(format!("the relay answered HTTP {code}")),
        }
        match json_reply(status, body) {
            Some(reply) if cancel_asked(&reply) => RelayDecision::cancel(cancel_reason(&reply)),
            Some(reply) if reply.get("continue") == Some(&Value::Bool(true)) => RelayDecision::Continue,
            _ => RelayDecision::cancel("the relay did not say continue"),
        }
    }

    /// Reads the relay's answer to a progress callback that needs none: only an explicit
    /// `{"cancel": true}` cancels.
    pub fn advisory(status: Option<u16>, body: &[u8]) -> RelayDecision {
        match json_reply(status, body) {
            Some(reply) if cancel_asked(&reply) => RelayDecision::cancel(cancel_reason(&reply)),
            _ => RelayDecision::Continue,
        }
    }

    fn cancel(reason: impl Into<String>) -> RelayDecision {
        RelayDecision::Cancel { reason: reason.into() }
    }
}

/// A 2xx answer's JSON body.
fn json_reply(status: Option<u16>, body: &[u8]) -> Option<Value> {
    matches!(status, Some(200..=299)).then(|| serde_json::from_slice(body).ok()).flatten()
}

fn cancel_asked(reply: &Value) -> bool {
    reply.get("cancel") == Some(&Value::Bool(true))
}

fn cancel_reason(reply: &Value) -> &str {
    reply.get("reason").and_then(Value::as_str).unwrap_or("the relay asked to cancel")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";

    #[test]
    fn signatures_verify_and_tampering_fails() {
        let body = br#"{"tool_call_id":"tc_000000000001"}"#;
        let header = sign(SECRET, 1_700_000_000, body);
        assert!(header.starts_with("t=1700000000,v1="));
        assert!(verify(SECRET, &header, body, 1_700_000_010, 300));
        assert!(!verify(SECRET, &header, b"{}", 1_700_000_010, 300), "other body");
        assert!(!verify(b"other", &header, body, 1_700_000_010, 300), "other secret");
        assert!(!verify(SECRET, &header, body, 1_700_001_000, 300), "replayed too late");
        let forged = header.replace("t=1700000000", "t=1700000500");
        assert!(!verify(SECRET, &forged, body, 1_700_000_500, 300), "timestamp is signed");
        assert!(!verify(SECRET, "v1=00", body, 1_700_000_000, 300));
    }

    /// During a rotation the header carries both secrets' signatures: a receiver holding either
    /// one accepts it, one holding neither does not.
    #[test]
    fn a_rotation_header_verifies_with_either_secret() {
        let body = br#"{"tool_call_id":"tc_000000000001"}"#;
        let header = sign_with_each(&[b"new", b"old"], 1_700_000_000, body);
        assert_eq!(header.matches(",v1=").count(), 2);
        assert!(verify(b"new", &header, body, 1_700_000_000, 300));
        assert!(verify(b"old", &header, body, 1_700_000_000, 300));
        assert!(!verify(b"other", &header, body, 1_700_000_000, 300));
    }

    /// A known vector, computed independently: `printf '1.{}' | openssl dgst -sha256 -hmac key`.
    #[test]
    fn signature_is_hmac_sha256_of_timestamp_dot_body() {
        assert_eq!(sign(b"key", 1, b"{}"), format!("t=1,v1={}", hex::encode(mac(b"key", 1, b"{}"))));
        let mut direct = keyed(b"key");
        direct.update(b"1.{}");
        assert_eq!(hex::encode(direct.finalize().into_bytes()), hex::encode(mac(b"key", 1, b"{}")));
    }

    #[test]
    fn gates_fail_closed() {
        assert_eq!(RelayDecision::at_gate(Some(200), br#"{"continue": true}"#), RelayDecision::Continue);
        for (status, body) in [
            (None, &b""[..]),
            (Some(500), br#"{"continue": true}"#),
            (Some(200), b"ok"),
            (Some(200), br#"{"continue": "yes"}"#),
            (Some(200), b"{}"),
        ] {
            assert!(matches!(RelayDecision::at_gate(status, body), RelayDecision::Cancel { .. }), "{status:?}");
        }
        assert_eq!(
            RelayDecision::at_gate(Some(200), br#"{"cancel": true, "reason": "caller hung up"}"#),
            RelayDecision::Cancel { reason: "caller hung up".into() }
        );
    }

    #[test]
    fn advisory_progress_only_cancels_when_asked() {
        assert_eq!(RelayDecision::advisory(None, b""), RelayDecision::Continue);
        assert_eq!(RelayDecision::advisory(Some(500), b""), RelayDecision::Continue);
        assert_eq!(RelayDecision::advisory(Some(200), b"{}"), RelayDecision::Continue);
        assert_eq!(
            RelayDecision::advisory(Some(200), br#"{"cancel": true}"#),
            RelayDecision::Cancel { reason: "the relay asked to cancel".into() }
        );
    }
}
