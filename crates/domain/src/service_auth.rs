//! Requests one part of Gatehouse sends another: the tool contract (lifecycle to tool) and the
//! executor hand-off (confirm to executor). Inside one application they travel by service
//! chaining and never leave the host; once a tool or the executor lives on another host they
//! cross the network, signed with the `contract_secret` variable by the one recipe of
//! `crate::signing`, which binds the time, a nonce, the method, the path, the
//! `Idempotency-Key` and the body (docs/architecture.md, "Signed hops").

use crate::signing::{self, SignedRequest};

/// The header a signed service request carries: `t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>`
/// (`crate::signing`).
pub const SIGNATURE_HEADER: &str = "x-gatehouse-contract-signature";

/// The path of the executor hand-off, on the executor's host or by service chaining.
pub const EXECUTOR_DRIVE_PATH: &str = "/internal/executor/drive";

/// How far a signed request's timestamp may be from the receiver's clock.
pub const TOLERANCE_SECONDS: u64 = signing::TOLERANCE_SECONDS;

pub use signing::Signed;

/// The signature header value for a contract request (which carries no `Idempotency-Key`), with
/// `nonce` (fresh for each request).
pub fn sign(secret: &[u8], unix_seconds: u64, nonce: &str, method: &str, target: &str, body: &[u8]) -> String {
    sign_with_each(&[secret], unix_seconds, nonce, method, target, body)
}

/// The header signed with each of `secrets` (one `v1` each): during a rotation the new secret
/// and the previous one, so a host that still knows only the previous one accepts it.
pub fn sign_with_each(
    secrets: &[&[u8]],
    unix_seconds: u64,
    nonce: &str,
    method: &str,
    target: &str,
    body: &[u8],
) -> String {
    let request = SignedRequest { method, target, idempotency_key: "", body };
    signing::sign_with_each(secrets, unix_seconds, nonce, &request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::{Refusal, verify};

    const SECRET: &[u8] = b"contract-secret";
    const NOW: u64 = 1_700_000_000;
    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signed_contract_request_verifies_only_as_itself() {
        let body = br#"{"tool_call_id":"tc_0123456789ab"}"#;
        let header = sign(SECRET, NOW, NONCE, "POST", "/tool/prepare", body);
        let request = |target, body| SignedRequest { method: "POST", target, idempotency_key: "", body };
        let signed = verify(&[SECRET], Some(&header), &request("/tool/prepare", body), NOW + 10);
        assert_eq!(signed, Ok(Signed { nonce: NONCE.into(), expires_at: NOW + TOLERANCE_SECONDS }));
        let execute = verify(&[SECRET], Some(&header), &request("/tool/execute", body), NOW);
        assert_eq!(execute, Err(Refusal::Mismatch), "another operation");
        let keyed = SignedRequest { idempotency_key: "k", ..request("/tool/prepare", body) };
        assert_eq!(verify(&[SECRET], Some(&header), &keyed, NOW), Err(Refusal::Mismatch), "a key added on the way");
    }
}
