use gatehouse_domain::keys::{self, Grant, Scope};
use gatehouse_domain::{ApiError, service_auth, signing};
use spin_sdk::http::Request;
use spin_sdk::variables;

/// Admits the request if its bearer credential may do `needed`, and says who it is.
///
/// The credential is either a key (`ghk_...`, looked up by its hash in `api_keys`, so a revoked
/// key is refused on its next request on every host) or the `api_token` variable, the first
/// tenant's admin key. Anything else, and an unknown or revoked key, is the same 401, whatever
/// was wrong; a valid key without the scope is a 403 that names the scope. A credential never
/// appears in a response or a log. docs/keys.md.
pub fn require_key(req: &Request, needed: Scope) -> Result<Grant, ApiError> {
    let grant = identify(req)?;
    if grant.allows(needed) { Ok(grant) } else { Err(ApiError::insufficient_scope(needed)) }
}

/// Who the bearer credential is, whatever it may do: a valid key or `api_token`, else 401.
pub fn identify(req: &Request) -> Result<Grant, ApiError> {
    let presented = req
        .header("authorization")
        .and_then(|value| value.as_str())
        .and_then(bearer_token)
        .ok_or_else(ApiError::unauthorized)?;
    let grant = if keys::key_prefix(presented).is_some() {
        let db = gatehouse_platform::open_db()?;
        gatehouse_store::key_grant(&db, &keys::key_hash(presented))?.ok_or_else(ApiError::unauthorized)?
    } else if constant_time_eq(presented.as_bytes(), api_token()?.as_bytes()) {
        Grant::api_token()
    } else {
        return Err(ApiError::unauthorized());
    };
    Ok(grant)
}

/// The `api_token` variable, refused when it could never be presented.
fn api_token() -> Result<String, ApiError> {
    let expected = variables::get("api_token")
        .map_err(|e| ApiError::internal().with_detail(format!("reading the api_token variable: {e:?}")))?;
    // An empty token would let an empty bearer through: fail closed on a misconfiguration.
    if expected.is_empty() {
        return Err(ApiError::internal().with_detail("the api_token variable is empty"));
    }
    // No presented token could ever match one with a comma or a space (see `bearer_token`).
    if expected.contains(',') || expected.contains(char::is_whitespace) {
        return Err(ApiError::internal().with_detail("the api_token variable contains a comma or whitespace"));
    }
    Ok(expected)
}

/// Admits a service request (the tool contract, the executor hand-off).
///
/// With `contract_secret` set, the request must carry a valid, fresh signature, however it
/// arrived; a refusal's code says which part failed (`signature_missing`, `signature_stale`,
/// `signature_mismatch`). Without it, only a request that came by service chaining (from a
/// component of the same application on the same host) is admitted: a contract route exposed
/// for a tool host is closed until the operator gives both sides the secret.
///
/// A valid signature's nonce must still be spent, once ([`signed_nonce`]): the handler does it
/// where it reaches the database.
pub fn require_service_request(req: &Request) -> Result<(), ApiError> {
    match gatehouse_platform::contract_secrets()? {
        None => match crate::route::matched_route(req) {
            Some(crate::CHAINED_ROUTE) => Ok(()),
            _ => Err(ApiError::unauthorized()),
        },
        Some(secrets) => verified(req, &secrets).map(drop).map_err(ApiError::from),
    }
}

/// The nonce of an admitted service request's signature, to spend once; `None` for a request
/// that came by service chaining with no `contract_secret` set, which carries none.
pub fn signed_nonce(req: &Request) -> Result<Option<signing::Signed>, ApiError> {
    match gatehouse_platform::contract_secrets()? {
        None => Ok(None),
        Some(secrets) => verified(req, &secrets).map(Some).map_err(ApiError::from),
    }
}

/// The request's signature checked, by the one recipe (`gatehouse_domain::signing`), with each
/// of this host's keys (the current one, and the previous one during a rotation): any one of
/// them vouching for it admits it. What is checked is the request as it arrived: its method,
/// its path and query, its `Idempotency-Key` (empty when it has none) and its body.
fn verified(req: &Request, secrets: &[String]) -> Result<signing::Signed, signing::Refusal> {
    let header = req.header(service_auth::SIGNATURE_HEADER).and_then(|value| value.as_str());
    let method = req.method().to_string();
    let target = if req.query().is_empty() { req.path().to_owned() } else { format!("{}?{}", req.path(), req.query()) };
    let idempotency_key = req.header("idempotency-key").and_then(|value| value.as_str()).unwrap_or_default();
    let request = signing::SignedRequest { method: &method, target: &target, idempotency_key, body: req.body() };
    let keys: Vec<&[u8]> = secrets.iter().map(|secret| secret.as_bytes()).collect();
    signing::verify(&keys, header, &request, gatehouse_platform::unix_now())
}

/// The token of a `Bearer` credential; the scheme is case-insensitive (RFC 7235).
///
/// A token has no comma or space (RFC 6750's b64token), so a value with one is a list of
/// credentials: two `Authorization` headers, joined by the server as HTTP defines. Which one
/// was meant is ambiguous, and an ambiguous credential is refused, not guessed.
fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    let ambiguous = token.contains(',') || token.contains(char::is_whitespace);
    (!token.is_empty() && !ambiguous).then_some(token)
}

/// Compares without an early exit, so the response time does not reveal how many
/// leading bytes of a guess were right. Only the guess's own length shows.
fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    if expected.is_empty() {
        return presented.is_empty();
    }
    let mut difference = presented.len() ^ expected.len();
    for (i, byte) in presented.iter().enumerate() {
        difference |= usize::from(byte ^ expected[i % expected.len()]);
    }
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_bearer_tokens() {
        assert_eq!(bearer_token("Bearer abc"), Some("abc"));
        assert_eq!(bearer_token("bearer  abc "), Some("abc"));
        assert_eq!(bearer_token("BEARER abc"), Some("abc"));
        assert_eq!(bearer_token("Basic abc"), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(bearer_token("Bearer   "), None);
        assert_eq!(bearer_token(""), None);
    }

    #[test]
    fn refuses_a_list_of_credentials() {
        assert_eq!(bearer_token("Bearer wrong, Bearer right"), None);
        assert_eq!(bearer_token("Bearer right, Bearer right"), None);
        assert_eq!(bearer_token("Bearer a,b"), None);
        assert_eq!(bearer_token("Bearer a b"), None);
    }

    #[test]
    fn compares_tokens_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secreT", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"secret2", b"secret"));
        assert!(!constant_time_eq(b"", b"secret"));
        assert!(!constant_time_eq(b"secretsecret", b"secret"));
    }
}
