//! Requests one part of Gatehouse sends another: the tool contract (lifecycle to tool) and the
//! executor hand-off (confirm to executor). Inside one application they travel by service
//! chaining and never leave the host; once a tool or the executor lives on another host they
//! cross the network, and are signed like callbacks with the `contract_secret` variable.
//!
//! The signature covers the method and the path as well as the body, so a captured signed
//! `prepare` cannot be replayed as an `execute` of the same call; the timestamp bounds replays
//! of the same request to the tolerance window.

use crate::callback;

/// The header a signed service request carries: `t=<unix seconds>,v1=<hex HMAC-SHA256>`, the
/// same format as the callbacks' `X-Gatehouse-Signature`.
pub const SIGNATURE_HEADER: &str = "x-gatehouse-contract-signature";

/// How far a signed request's timestamp may be from the receiver's clock.
pub const TOLERANCE_SECONDS: u64 = 300;

/// The signature header value for a request.
pub fn sign(secret: &[u8], unix_seconds: u64, method: &str, path: &str, body: &[u8]) -> String {
    callback::sign(secret, unix_seconds, &signed_content(method, path, body))
}

/// Whether `header` signs this request, with a timestamp within [`TOLERANCE_SECONDS`] of `now`.
pub fn verify(secret: &[u8], header: &str, method: &str, path: &str, body: &[u8], now: u64) -> bool {
    callback::verify(secret, header, &signed_content(method, path, body), now, TOLERANCE_SECONDS)
}

/// `METHOD SP path LF body`: what the MAC is computed over.
fn signed_content(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(method.len() + path.len() + 2 + body.len());
    content.extend_from_slice(method.to_ascii_uppercase().as_bytes());
    content.push(b' ');
    content.extend_from_slice(path.as_bytes());
    content.push(b'\n');
    content.extend_from_slice(body);
    content
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"contract-secret";
    const NOW: u64 = 1_700_000_000;

    #[test]
    fn a_signed_request_verifies_only_as_itself() {
        let body = br#"{"tool_call_id":"tc_0123456789ab"}"#;
        let header = sign(SECRET, NOW, "POST", "/tool/prepare", body);
        assert!(verify(SECRET, &header, "POST", "/tool/prepare", body, NOW + 10));
        assert!(verify(SECRET, &header, "post", "/tool/prepare", body, NOW), "methods compare case-insensitively");
        assert!(!verify(SECRET, &header, "POST", "/tool/execute", body, NOW), "another operation");
        assert!(!verify(SECRET, &header, "POST", "/tool/prepare", b"{}", NOW), "another body");
        assert!(!verify(b"other", &header, "POST", "/tool/prepare", body, NOW), "another secret");
        assert!(!verify(SECRET, &header, "POST", "/tool/prepare", body, NOW + TOLERANCE_SECONDS + 1), "stale");
        assert!(!verify(SECRET, "", "POST", "/tool/prepare", body, NOW), "unsigned");
    }
}
