//! Callbacks to the relay (docs/architecture.md, "Callbacks"): their payloads, their
//! signature, and how a relay's answer at a gate is read.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::signing::{self, Refusal, Signed, SignedRequest};
use crate::{SessionId, Status, ToolCallId};

/// The header that carries a callback's signature, by the one recipe (`signing`): the tenant's
/// callback secret over the time, a nonce, `POST`, the relay URL's path and the body.
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

/// The signature header value for a callback `body` posted to `url` at `unix_seconds` with
/// `nonce`, one `v1` per secret (the tenant's, and its previous one during a rotation): the one
/// recipe of `signing`, so the signature binds the callback to its relay path as well as its time
/// and body, and a relay spends its nonce once. A callback carries no `Idempotency-Key`.
pub fn sign_with_each(secrets: &[&[u8]], url: &str, unix_seconds: u64, nonce: &str, body: &[u8]) -> String {
    signing::sign_with_each(secrets, unix_seconds, nonce, &posted(&signing::target_of(url), body))
}

/// Checks a callback's signature the way a relay should, for a callback that arrived at `target`
/// (its path and query) with `body` as received; the relay then spends the returned nonce once.
pub fn verify(secrets: &[&[u8]], header: Option<&str>, target: &str, body: &[u8], now: u64) -> Result<Signed, Refusal> {
    signing::verify(secrets, header, &posted(target, body), now)
}

fn posted<'a>(target: &'a str, body: &'a [u8]) -> SignedRequest<'a> {
    SignedRequest { method: "POST", target, idempotency_key: "", body }
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

    /// A callback's signature binds its path as well as its body and time: one captured on its way
    /// to one relay path is refused at another, and a rotation header verifies with either secret.
    #[test]
    fn a_callback_signature_binds_its_path_body_and_time() {
        let body = br#"{"tool_call_id":"tc_000000000001"}"#;
        let nonce = "0123456789abcdef";
        let url = "https://relay.example/callbacks/a?x=1";
        let header = sign_with_each(&[b"new", b"old"], url, 1_700_000_000, nonce, body);
        assert_eq!(header.matches(",v1=").count(), 2);
        let now = 1_700_000_010;
        for secret in [&b"new"[..], b"old"] {
            let signed = verify(&[secret], Some(&header), "/callbacks/a?x=1", body, now).expect("verifies");
            assert_eq!(signed.nonce, nonce);
        }
        assert_eq!(verify(&[b"other"], Some(&header), "/callbacks/a?x=1", body, now), Err(Refusal::Mismatch));
        assert_eq!(verify(&[b"new"], Some(&header), "/callbacks/b?x=1", body, now), Err(Refusal::Mismatch));
        assert_eq!(verify(&[b"new"], Some(&header), "/callbacks/a?x=1", b"{}", now), Err(Refusal::Mismatch));
        assert_eq!(verify(&[b"new"], Some(&header), "/callbacks/a?x=1", body, now + 600), Err(Refusal::Stale));
        assert_eq!(verify(&[b"new"], None, "/callbacks/a?x=1", body, now), Err(Refusal::Missing));
    }

    /// The published vector's `callback` entry: what Gatehouse sends to a relay, which the clients'
    /// verifiers are tested against too.
    #[test]
    fn the_published_callback_vector_signs_and_verifies() {
        #[derive(serde::Deserialize)]
        struct Published {
            callback: Vector,
        }
        #[derive(serde::Deserialize)]
        struct Vector {
            secret: String,
            timestamp: u64,
            nonce: String,
            url: String,
            target: String,
            body: String,
            header: String,
        }
        let published: Published = match serde_json::from_str(include_str!("../../../openapi/signing-test-vector.json"))
        {
            Ok(published) => published,
            Err(e) => panic!("openapi/signing-test-vector.json: {e}"),
        };
        let v = published.callback;
        let secret = v.secret.as_bytes();
        assert_eq!(sign_with_each(&[secret], &v.url, v.timestamp, &v.nonce, v.body.as_bytes()), v.header);
        let signed = verify(&[secret], Some(&v.header), &v.target, v.body.as_bytes(), v.timestamp);
        assert_eq!(signed.map(|s| s.nonce), Ok(v.nonce));
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
