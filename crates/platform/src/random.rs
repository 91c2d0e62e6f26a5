//! Identifiers made from the host's secure random source.

use gatehouse_domain::ToolCallId;

/// Bytes from the host's secure random source.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let bytes = wasi::random::random::get_random_bytes(N as u64);
    let mut out = [0u8; N];
    out.iter_mut().zip(bytes).for_each(|(slot, byte)| *slot = byte);
    out
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn new_tool_call_id() -> ToolCallId {
    ToolCallId::from_random_bytes(random_bytes::<6>())
}

/// An unguessable token, e.g. a lease owner.
pub fn new_token() -> String {
    hex(&random_bytes::<16>())
}
