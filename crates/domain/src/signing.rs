//! The one signing recipe for a request Gatehouse sends to a host that must know it came from
//! Gatehouse: the tool contract and the executor hand-off (`X-Gatehouse-Contract-Signature`,
//! keyed with `contract_secret`, see `service_auth`) and a declared tool's requests to its
//! backend (`X-Gatehouse-Signature`, keyed with the tool's signing secret), and callbacks to a
//! relay (`X-Gatehouse-Signature`, keyed with the tenant's callback secret, see `callback`).
//!
//! The header is `t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>...],n=<nonce>`, one `v1` per
//! secret during a rotation, and the MAC is over
//!
//! ```text
//! <t> "." <nonce> LF <METHOD> SP <target> LF <Idempotency-Key> LF <body>
//! ```
//!
//! so a signature vouches for one request only: the time bounds a capture's use to the
//! tolerance, the nonce makes it single-use within it (the receiver spends each nonce once), and
//! the method, the target (path and query) and the key stop a captured request from being sent
//! to another record or as another operation. Each field before the body ends at a character it
//! cannot contain, so no two requests have the same content. docs/architecture.md, "Signed
//! hops"; the published test vector, which every implementation is tested against, is
//! openapi/signing-test-vector.json.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::{ApiError, ErrorCode};

/// How far a signed request's timestamp may be from the receiver's clock, and so how long a
/// receiver must remember a nonce it has spent.
pub const TOLERANCE_SECONDS: u64 = 300;

/// A nonce is 16 to 64 lowercase hexadecimal digits.
const NONCE_LENGTHS: std::ops::RangeInclusive<usize> = 16..=64;

/// The longest header a receiver reads; a longer one is refused before any MAC is computed.
const MAX_HEADER_LENGTH: usize = 1024;

/// What a signature covers besides its time and nonce: the request as it goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedRequest<'a> {
    /// The method; signed upper-case, so either case verifies.
    pub method: &'a str,
    /// The request target as sent: the path and, when there is one, `?` and the query.
    pub target: &'a str,
    /// The `Idempotency-Key` header's value; empty when the request carries none.
    pub idempotency_key: &'a str,
    pub body: &'a [u8],
}

/// What a valid signature vouches for: the request is fresh and this nonce is its own. The
/// receiver spends the nonce once; it may forget it after `expires_at`, when the timestamp
/// alone refuses the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub nonce: String,
    /// Unix seconds.
    pub expires_at: u64,
}

/// Which part of a signature failed. A receiver says it (the error code) so the sender can tell
/// a wrong clock from a wrong secret or recipe; none of it helps a forger, who learns nothing the
/// header did not already show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Refusal {
    /// No header, or not `t=<digits>,v1=<hex>,n=<nonce>`.
    #[error("no signature, or one that is not t=<unix seconds>,v1=<hex>,n=<nonce>")]
    Missing,
    /// The timestamp is further than [`TOLERANCE_SECONDS`] from the receiver's clock.
    #[error("the signature's timestamp is more than {TOLERANCE_SECONDS} s from this host's clock")]
    Stale,
    /// No `v1` is the MAC of this request with any of the receiver's secrets.
    #[error("the signature does not match this request and secret")]
    Mismatch,
    /// The nonce was already spent within the window.
    #[error("the signature's nonce was already used")]
    Replayed,
}

impl Refusal {
    /// The stable code a 401 carries for this refusal.
    pub const fn code(self) -> ErrorCode {
        match self {
            Refusal::Missing => ErrorCode::SignatureMissing,
            Refusal::Stale => ErrorCode::SignatureStale,
            Refusal::Mismatch => ErrorCode::SignatureMismatch,
            Refusal::Replayed => ErrorCode::SignatureReplayed,
        }
    }

    /// The refusal a 401's `code` names, when it names one: a sender reads which part failed.
    pub fn of_code(code: &str) -> Option<Refusal> {
        [Refusal::Missing, Refusal::Stale, Refusal::Mismatch, Refusal::Replayed]
            .into_iter()
            .find(|refusal| refusal.code().as_str() == code)
    }

    fn sentence(self) -> &'static str {
        match self {
            Refusal::Missing => "This request is not signed by Gatehouse.",
            Refusal::Stale => "This request's signature is too old, or the two hosts' clocks disagree.",
            Refusal::Mismatch => "This request's signature does not match it: a different secret or a changed request.",
            Refusal::Replayed => "This signed request was already used; each one is good once.",
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> ApiError {
        ApiError::new(refusal.code(), refusal.sentence())
    }
}

/// The signature header value for `request` sent at `unix_seconds` with `nonce` (fresh for each
/// request and each try), one `v1` per secret: during a rotation the new secret's and the
/// previous one's, so a receiver that knows either accepts it.
pub fn sign_with_each(secrets: &[&[u8]], unix_seconds: u64, nonce: &str, request: &SignedRequest<'_>) -> String {
    let content = content(unix_seconds, nonce, request);
    let mut header = format!("t={unix_seconds}");
    for secret in secrets {
        let mut mac = keyed(secret);
        mac.update(&content);
        header.push_str(",v1=");
        header.push_str(&hex::encode(mac.finalize().into_bytes()));
    }
    header.push_str(",n=");
    header.push_str(nonce);
    header
}

/// Whether `header` signs `request` with one of `secrets`, at a time within
/// [`TOLERANCE_SECONDS`] of `now`; if so, the nonce the receiver must spend (a nonce it has
/// spent is [`Refusal::Replayed`], which only the receiver's store can tell).
pub fn verify(
    secrets: &[&[u8]],
    header: Option<&str>,
    request: &SignedRequest<'_>,
    now: u64,
) -> Result<Signed, Refusal> {
    let parsed = parse(header.unwrap_or_default()).ok_or(Refusal::Missing)?;
    if parsed.timestamp.abs_diff(now) > TOLERANCE_SECONDS {
        return Err(Refusal::Stale);
    }
    let content = content(parsed.timestamp, parsed.nonce, request);
    let matches = secrets.iter().any(|secret| {
        parsed.macs.iter().any(|candidate| {
            let mut mac = keyed(secret);
            mac.update(&content);
            // `verify_slice` compares in constant time.
            mac.verify_slice(candidate).is_ok()
        })
    });
    if !matches {
        return Err(Refusal::Mismatch);
    }
    Ok(Signed { nonce: parsed.nonce.to_owned(), expires_at: parsed.timestamp.saturating_add(TOLERANCE_SECONDS) })
}

/// `<t> "." <nonce> LF <METHOD> SP <target> LF <Idempotency-Key> LF <body>`: the bytes the MAC
/// is computed over. Public so a receiver that refuses a request can show what it computed.
pub fn content(unix_seconds: u64, nonce: &str, request: &SignedRequest<'_>) -> Vec<u8> {
    let head = format!(
        "{unix_seconds}.{nonce}\n{} {}\n{}\n",
        request.method.to_ascii_uppercase(),
        request.target,
        request.idempotency_key
    );
    let mut content = head.into_bytes();
    content.extend_from_slice(request.body);
    content
}

/// The request target of an absolute URL, as the receiver sees it in the request line: the path
/// and query (`http://host:1/a/b?q#f` is `/a/b?q`, `http://host?q` is `/?q`).
pub fn target_of(url: &str) -> std::borrow::Cow<'_, str> {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let without_fragment = after_scheme.split('#').next().unwrap_or_default();
    match without_fragment.find(['/', '?']) {
        Some(start) if without_fragment[start..].starts_with('/') => without_fragment[start..].into(),
        Some(start) => format!("/{}", &without_fragment[start..]).into(),
        None => "/".into(),
    }
}

struct Parsed<'h> {
    timestamp: u64,
    nonce: &'h str,
    macs: Vec<Vec<u8>>,
}

/// The header's parts: exactly one `t` and one `n`, at least one `v1`; other keys (a later
/// scheme's) are ignored. A second `t` or `n` is ambiguous and refused.
fn parse(header: &str) -> Option<Parsed<'_>> {
    if header.len() > MAX_HEADER_LENGTH {
        return None;
    }
    let (mut timestamp, mut nonce, mut macs) = (None, None, Vec::new());
    for part in header.split(',') {
        match part.trim().split_once('=')? {
            ("t", value) if timestamp.is_none() && (1..=12).contains(&value.len()) => {
                timestamp = Some(value.parse::<u64>().ok()?);
            }
            ("n", value) if nonce.is_none() && well_formed_nonce(value) => nonce = Some(value),
            ("v1", value) => macs.push(hex::decode(value).ok()?),
            ("t" | "n", _) => return None,
            _ => {}
        }
    }
    if macs.is_empty() {
        return None;
    }
    Some(Parsed { timestamp: timestamp?, nonce: nonce?, macs })
}

fn well_formed_nonce(nonce: &str) -> bool {
    NONCE_LENGTHS.contains(&nonce.len()) && nonce.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// HMAC-SHA256 keyed with `secret`: every MAC this crate makes starts here.
pub(crate) fn keyed(secret: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length, so this cannot fail.
    match Hmac::<Sha256>::new_from_slice(secret) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC accepts every key length"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// openapi/signing-test-vector.json, the vector the docs publish and the SDKs and the kit
    /// are tested against too.
    #[derive(serde::Deserialize)]
    struct Vector {
        secret: String,
        timestamp: u64,
        nonce: String,
        method: String,
        target: String,
        idempotency_key: String,
        body: String,
        content: String,
        header: String,
    }

    fn vector() -> Vector {
        let text = include_str!("../../../openapi/signing-test-vector.json");
        match serde_json::from_str(text) {
            Ok(vector) => vector,
            Err(e) => panic!("openapi/signing-test-vector.json: {e}"),
        }
    }

    fn request(v: &Vector) -> SignedRequest<'_> {
        SignedRequest {
            method: &v.method,
            target: &v.target,
            idempotency_key: &v.idempotency_key,
            body: v.body.as_bytes(),
        }
    }

    #[test]
    fn the_published_test_vector_signs_and_verifies() {
        let v = vector();
        assert_eq!(content(v.timestamp, &v.nonce, &request(&v)), v.content.as_bytes());
        assert_eq!(sign_with_each(&[v.secret.as_bytes()], v.timestamp, &v.nonce, &request(&v)), v.header);
        let signed = verify(&[v.secret.as_bytes()], Some(&v.header), &request(&v), v.timestamp + 299);
        assert_eq!(signed, Ok(Signed { nonce: v.nonce.clone(), expires_at: v.timestamp + TOLERANCE_SECONDS }));
    }

    #[test]
    fn each_part_of_the_request_is_bound() {
        let v = vector();
        let secrets: &[&[u8]] = &[v.secret.as_bytes()];
        let at = v.timestamp;
        let check = |request: SignedRequest<'_>| verify(secrets, Some(&v.header), &request, at);
        assert!(check(SignedRequest { method: &v.method.to_lowercase(), ..request(&v) }).is_ok(), "method case");
        assert_eq!(check(SignedRequest { method: "POST", ..request(&v) }), Err(Refusal::Mismatch), "method");
        assert_eq!(check(SignedRequest { target: "/holds/H3", ..request(&v) }), Err(Refusal::Mismatch), "path");
        let other_query = format!("{}&x=1", v.target);
        assert_eq!(check(SignedRequest { target: &other_query, ..request(&v) }), Err(Refusal::Mismatch), "query");
        assert_eq!(check(SignedRequest { idempotency_key: "", ..request(&v) }), Err(Refusal::Mismatch), "key");
        assert_eq!(check(SignedRequest { body: b"{}", ..request(&v) }), Err(Refusal::Mismatch), "body");
        assert_eq!(verify(&[b"other"], Some(&v.header), &request(&v), at), Err(Refusal::Mismatch), "secret");
        let swapped = v.header.replace(&v.nonce, "fedcba9876543210fedcba9876543210");
        assert_eq!(verify(secrets, Some(&swapped), &request(&v), at), Err(Refusal::Mismatch), "nonce");
    }

    #[test]
    fn each_refusal_says_which_part_failed() {
        let v = vector();
        let secrets: &[&[u8]] = &[v.secret.as_bytes()];
        let stale = v.timestamp + TOLERANCE_SECONDS + 1;
        assert_eq!(verify(secrets, Some(&v.header), &request(&v), stale), Err(Refusal::Stale));
        assert_eq!(verify(secrets, Some(&v.header), &request(&v), v.timestamp - 301), Err(Refusal::Stale));
        assert_eq!(verify(secrets, None, &request(&v), v.timestamp), Err(Refusal::Missing));
        let without_nonce = v.header.split(",n=").next().unwrap_or_default().to_owned();
        assert_eq!(verify(secrets, Some(&without_nonce), &request(&v), v.timestamp), Err(Refusal::Missing));
        let two_times = format!("t=1,{}", v.header);
        assert_eq!(verify(secrets, Some(&two_times), &request(&v), v.timestamp), Err(Refusal::Missing));
        let short = sign_with_each(secrets, v.timestamp, "abc", &request(&v));
        assert_eq!(verify(secrets, Some(&short), &request(&v), v.timestamp), Err(Refusal::Missing));
        for refusal in [Refusal::Missing, Refusal::Stale, Refusal::Mismatch, Refusal::Replayed] {
            assert_eq!(ApiError::from(refusal).http_status(), 401);
        }
    }

    #[test]
    fn the_target_is_the_path_and_query_the_receiver_sees() {
        assert_eq!(target_of("http://gmail.spin.internal/tool/prepare"), "/tool/prepare");
        assert_eq!(
            target_of("https://tools.example.com:8443/internal/tools/gmail/tool/execute?x=1#top"),
            "/internal/tools/gmail/tool/execute?x=1"
        );
        assert_eq!(target_of("http://host"), "/");
        assert_eq!(target_of("http://host?q=1"), "/?q=1");
    }

    #[test]
    fn during_a_rotation_either_secret_verifies() {
        let v = vector();
        let header = sign_with_each(&[b"new", v.secret.as_bytes()], v.timestamp, &v.nonce, &request(&v));
        assert!(verify(&[v.secret.as_bytes()], Some(&header), &request(&v), v.timestamp).is_ok());
        assert!(verify(&[b"new"], Some(&header), &request(&v), v.timestamp).is_ok());
        assert!(verify(&[b"gone", b"new"], Some(&header), &request(&v), v.timestamp).is_ok());
    }
}
