//! A value a server hands out and must get back unaltered, such as the MCP `requestState`:
//! `<hex payload>.<unix seconds>.<hex HMAC-SHA256>`, the MAC over its purpose, its time and the
//! payload, keyed with a secret only that server holds. Unlike a request signature (`signing`)
//! it is not spent once: it names a decision whose own transition happens at most once. The
//! purpose keeps a token sealed for one use from standing in for another's.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// `payload` sealed for `purpose` at `unix_seconds`.
pub fn seal(secret: &[u8], purpose: &str, payload: &str, unix_seconds: u64) -> String {
    let mac = mac(secret, purpose, unix_seconds, payload).finalize().into_bytes();
    format!("{}.{unix_seconds}.{}", hex::encode(payload), hex::encode(mac))
}

/// The payload of a token this server sealed for `purpose` no more than `ttl_seconds` before
/// `now`; `None` for anything else, altered, forged or lapsed.
pub fn open(secret: &[u8], purpose: &str, token: &str, now: u64, ttl_seconds: u64) -> Option<String> {
    let mut parts = token.splitn(3, '.');
    let (payload, time, given) = (parts.next()?, parts.next()?, parts.next()?);
    let payload = String::from_utf8(hex::decode(payload).ok()?).ok()?;
    let sealed_at = time.parse::<u64>().ok().filter(|_| time.bytes().all(|b| b.is_ascii_digit()))?;
    if sealed_at > now.saturating_add(60) || now.saturating_sub(sealed_at) > ttl_seconds {
        return None;
    }
    // `verify_slice` compares in constant time.
    mac(secret, purpose, sealed_at, &payload).verify_slice(&hex::decode(given).ok()?).ok()?;
    Some(payload)
}

fn mac(secret: &[u8], purpose: &str, unix_seconds: u64, payload: &str) -> Hmac<Sha256> {
    let mut mac = crate::signing::keyed(secret);
    mac.update(format!("{purpose}\n{unix_seconds}\n").as_bytes());
    mac.update(payload.as_bytes());
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_unaltered_for_its_purpose_and_in_time() {
        let token = seal(b"secret", "state", "checkpoint|tc_1|send_email", 1_000);
        assert_eq!(open(b"secret", "state", &token, 1_010, 3600).as_deref(), Some("checkpoint|tc_1|send_email"));
        assert_eq!(open(b"other", "state", &token, 1_010, 3600), None, "another secret");
        assert_eq!(open(b"secret", "other purpose", &token, 1_010, 3600), None, "another purpose");
        assert_eq!(open(b"secret", "state", &token, 1_000 + 3601, 3600), None, "lapsed");
        let later = token.replacen(".1000.", ".2000.", 1);
        assert_eq!(open(b"secret", "state", &later, 2_010, 3600), None, "its time is sealed");
        let other = seal(b"secret", "state", "checkpoint|tc_2|send_email", 1_000);
        let spliced = format!(
            "{}.{}",
            other.split_once('.').map(|p| p.0).unwrap_or_default(),
            token.split_once('.').map(|p| p.1).unwrap_or_default()
        );
        assert_eq!(open(b"secret", "state", &spliced, 1_010, 3600), None, "another payload");
        assert_eq!(open(b"secret", "state", "not a token", 1_010, 3600), None);
    }
}
