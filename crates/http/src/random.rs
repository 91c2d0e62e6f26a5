//! Identifiers made from the host's secure random source.

use gatehouse_domain::ToolCallId;
use spin_sdk::http::Request;

/// Bytes from the host's secure random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let bytes = wasi::random::random::get_random_bytes(N as u64);
    let mut out = [0u8; N];
    out.iter_mut().zip(bytes).for_each(|(slot, byte)| *slot = byte);
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn new_tool_call_id() -> ToolCallId {
    ToolCallId::from_random_bytes(random_bytes::<6>())
}

/// An unguessable token, e.g. a lease owner.
pub fn new_token() -> String {
    hex(&random_bytes::<16>())
}

/// The trace id of a W3C `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`), or a new one.
pub fn trace_id(req: &Request) -> String {
    req.header("traceparent")
        .and_then(|value| value.as_str())
        .and_then(parse_traceparent)
        .unwrap_or_else(|| hex(&random_bytes::<16>()))
}

/// A `traceparent` header that carries `trace_id` on to the next hop.
pub fn traceparent(trace_id: &str) -> String {
    format!("00-{trace_id}-0000000000000001-01")
}

fn parse_traceparent(value: &str) -> Option<String> {
    let mut parts = value.trim().split('-');
    let (version, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let is_hex = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let valid = is_hex(version, 2)
        && version != "ff"
        && is_hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && is_hex(parent, 16)
        && is_hex(flags, 2);
    valid.then(|| trace.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_valid_traceparents_only() {
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(parse_traceparent(&format!("00-{trace}-00f067aa0ba902b7-01")).as_deref(), Some(trace));
        assert_eq!(parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"), None);
        assert_eq!(parse_traceparent(&format!("00-{}-00f067aa0ba902b7-01", trace.to_uppercase())), None);
        assert_eq!(parse_traceparent("garbage"), None);
    }
}
