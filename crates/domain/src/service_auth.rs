//! Requests one part of Gatehouse sends another: the tool contract (lifecycle to tool) and the
//! executor hand-off (confirm to executor). Inside one application they travel by service
//! chaining and never leave the host; once a tool or the executor lives on another host they
//! cross the network, and are signed like callbacks with the `contract_secret` variable.
//!
//! The signature covers the method and the path as well as the body, so a captured signed
//! `prepare` cannot be replayed as an `execute` of the same call; the timestamp bounds replays
//! of the same request to the tolerance window, and the nonce makes each request single-use
//! within it: the receiver records every nonce it accepts until the window has passed, and
//! refuses one it has seen (docs/architecture.md, "Signed hops").

use crate::callback;

/// The header a signed service request carries: `t=<unix seconds>,v1=<hex HMAC-SHA256>,n=<nonce>`,
/// the callbacks' `X-Gatehouse-Signature` format with a nonce beside it.
pub const SIGNATURE_HEADER: &str = "x-gatehouse-contract-signature";

/// The path of the executor hand-off, on the executor's host or by service chaining.
pub const EXECUTOR_DRIVE_PATH: &str = "/internal/executor/drive";

/// How far a signed request's timestamp may be from the receiver's clock.
pub const TOLERANCE_SECONDS: u64 = 300;

/// A nonce is 16 to 64 lowercase hexadecimal digits.
const NONCE_LENGTHS: std::ops::RangeInclusive<usize> = 16..=64;

/// What a valid signature vouches for: the request is fresh and this nonce is its own. The
/// receiver spends the nonce once; it may forget it after `expires_at`, when the timestamp
/// alone refuses the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub nonce: String,
    /// Unix seconds.
    pub expires_at: u64,
}

/// The signature header value for a request, with `nonce` (fresh for each request).
pub fn sign(secret: &[u8], unix_seconds: u64, nonce: &str, method: &str, path: &str, body: &[u8]) -> String {
    sign_with_each(&[secret], unix_seconds, nonce, method, path, body)
}

/// The header signed with each of `secrets` (one `v1` each): during a rotation the new secret
/// and the previous one, so a host that still knows only the previous one accepts it.
pub fn sign_with_each(
    secrets: &[&[u8]],
    unix_seconds: u64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> String {
    let macs = callback::sign_with_each(secrets, unix_seconds, &signed_content(nonce, method, path, body));
    format!("{macs},n={nonce}")
}

/// Whether `header` signs this request, with a timestamp within [`TOLERANCE_SECONDS`] of `now`;
/// if so, the nonce to spend.
pub fn verify(secret: &[u8], header: &str, method: &str, path: &str, body: &[u8], now: u64) -> Option<Signed> {
    let nonce = nonce_of(header)?;
    let timestamp = header.split(',').find_map(|part| part.trim().strip_prefix("t="))?.parse::<u64>().ok()?;
    let content = signed_content(nonce, method, path, body);
    callback::verify(secret, header, &content, now, TOLERANCE_SECONDS)
        .then(|| Signed { nonce: nonce.to_owned(), expires_at: timestamp.saturating_add(TOLERANCE_SECONDS) })
}

fn nonce_of(header: &str) -> Option<&str> {
    let nonce = header.split(',').find_map(|part| part.trim().strip_prefix("n="))?;
    let well_formed =
        NONCE_LENGTHS.contains(&nonce.len()) && nonce.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    well_formed.then_some(nonce)
}

/// `nonce LF METHOD SP path LF body`: what the MAC is computed over.
fn signed_content(nonce: &str, method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut content = Vec::with_capacity(nonce.len() + method.len() + path.len() + 3 + body.len());
    content.extend_from_slice(nonce.as_bytes());
    content.push(b'\n');
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
    const NONCE: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_signed_request_verifies_only_as_itself() {
        let body = br#"{"tool_call_id":"tc_0123456789ab"}"#;
        let header = sign(SECRET, NOW, NONCE, "POST", "/tool/prepare", body);
        let signed = verify(SECRET, &header, "POST", "/tool/prepare", body, NOW + 10);
        assert_eq!(signed, Some(Signed { nonce: NONCE.into(), expires_at: NOW + TOLERANCE_SECONDS }));
        assert!(
            verify(SECRET, &header, "post", "/tool/prepare", body, NOW).is_some(),
            "methods compare case-insensitively"
        );
        assert!(verify(SECRET, &header, "POST", "/tool/execute", body, NOW).is_none(), "another operation");
        assert!(verify(SECRET, &header, "POST", "/tool/prepare", b"{}", NOW).is_none(), "another body");
        assert!(verify(b"other", &header, "POST", "/tool/prepare", body, NOW).is_none(), "another secret");
        let stale = NOW + TOLERANCE_SECONDS + 1;
        assert!(verify(SECRET, &header, "POST", "/tool/prepare", body, stale).is_none(), "stale");
        assert!(verify(SECRET, "", "POST", "/tool/prepare", body, NOW).is_none(), "unsigned");
    }

    #[test]
    fn the_nonce_is_signed_and_must_be_there() {
        let body = b"{}";
        let header = sign(SECRET, NOW, NONCE, "POST", "/tool/execute", body);
        let swapped = header.replace(NONCE, "fedcba9876543210fedcba9876543210");
        assert!(verify(SECRET, &swapped, "POST", "/tool/execute", body, NOW).is_none(), "another nonce");
        let without = header.split(",n=").next().unwrap_or_default().to_owned();
        assert!(verify(SECRET, &without, "POST", "/tool/execute", body, NOW).is_none(), "no nonce");
        let short = sign(SECRET, NOW, "abc", "POST", "/tool/execute", body);
        assert!(verify(SECRET, &short, "POST", "/tool/execute", body, NOW).is_none(), "a nonce too short");
    }
}
