use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

const TOOL_CALL_PREFIX: &str = "tc_";
const TOOL_CALL_HEX_LEN: usize = 12;

/// Matches the `CHECK (char_length(session_id) BETWEEN 1 AND 200)` in the migrations.
pub const MAX_SESSION_ID_LEN: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InvalidId {
    #[error("a tool call id is \"tc_\" followed by 12 lowercase hexadecimal digits")]
    ToolCall,
    #[error("a session id must not be empty")]
    EmptySession,
    #[error("a session id must be at most {MAX_SESSION_ID_LEN} characters long")]
    SessionTooLong,
    #[error("a session id must not contain control characters")]
    SessionControlCharacter,
}

/// A tool call id: `tc_` + 12 lowercase hex digits, e.g. `tc_0123456789ab`.
///
/// Holding one proves the string is well formed, so queries never run on garbage ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolCallId(String);

impl ToolCallId {
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        let hex = value.strip_prefix(TOOL_CALL_PREFIX).ok_or(InvalidId::ToolCall)?;
        let well_formed =
            hex.len() == TOOL_CALL_HEX_LEN && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if well_formed { Ok(Self(value.to_owned())) } else { Err(InvalidId::ToolCall) }
    }

    /// Builds an id from 6 random bytes. The caller supplies the randomness so that this
    /// crate stays free of any platform's random source.
    pub fn from_random_bytes(bytes: [u8; 6]) -> Self {
        let mut id = String::with_capacity(TOOL_CALL_PREFIX.len() + TOOL_CALL_HEX_LEN);
        id.push_str(TOOL_CALL_PREFIX);
        for byte in bytes {
            id.push(char::from(HEX_DIGITS[usize::from(byte >> 4)]));
            id.push(char::from(HEX_DIGITS[usize::from(byte & 0x0f)]));
        }
        Self(id)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

impl fmt::Display for ToolCallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ToolCallId {
    type Error = InvalidId;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<ToolCallId> for String {
    fn from(id: ToolCallId) -> Self {
        id.0
    }
}

/// A relay's session id. The relay chooses it, so only its size and printability are
/// constrained: anything it can put in a URL path segment is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

/// A session as its tenant names it: two tenants may use the same session id, and they are two
/// sessions (docs/architecture.md, "Tenants").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionOf<'a> {
    pub tenant: &'a str,
    pub session_id: &'a SessionId,
}

impl SessionId {
    pub fn parse(value: &str) -> Result<Self, InvalidId> {
        if value.is_empty() {
            return Err(InvalidId::EmptySession);
        }
        if value.chars().count() > MAX_SESSION_ID_LEN {
            return Err(InvalidId::SessionTooLong);
        }
        if value.chars().any(char::is_control) {
            return Err(InvalidId::SessionControlCharacter);
        }
        Ok(Self(value.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SessionId {
    type Error = InvalidId;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> Self {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_well_formed_tool_call_ids() {
        for id in ["tc_0123456789ab", "tc_000000000000", "tc_ffffffffffff"] {
            assert_eq!(ToolCallId::parse(id).map(|id| id.to_string()), Ok(id.to_owned()));
        }
    }

    #[test]
    fn rejects_malformed_tool_call_ids() {
        let bad = [
            "",
            "tc_",
            "tc_0123456789a",    // 11 digits
            "tc_0123456789abc",  // 13 digits
            "tc_0123456789AB",   // upper case
            "TC_0123456789ab",   // upper-case prefix
            "tc-0123456789ab",   // wrong separator
            "tc_0123456789ag",   // not hex
            " tc_0123456789ab",  // padding
            "tc_0123456789ab\n", // trailing newline
            "xx_0123456789ab",
            "tc_٠١٢٣٤٥٦٧٨٩ab", // non-ASCII digits
        ];
        for id in bad {
            assert_eq!(ToolCallId::parse(id), Err(InvalidId::ToolCall), "{id:?}");
        }
    }

    #[test]
    fn ids_built_from_random_bytes_are_valid() {
        let id = ToolCallId::from_random_bytes([0x01, 0x23, 0x45, 0x67, 0x89, 0xab]);
        assert_eq!(id.as_str(), "tc_0123456789ab");
        let id = ToolCallId::from_random_bytes([0xff; 6]);
        assert!(ToolCallId::parse(id.as_str()).is_ok());
    }

    #[test]
    fn tool_call_ids_deserialize_only_when_valid() {
        let good: Result<ToolCallId, _> = serde_json::from_str("\"tc_abcdefabcdef\"");
        assert!(good.is_ok());
        let bad: Result<ToolCallId, _> = serde_json::from_str("\"tc_nothexnothex\"");
        assert!(bad.is_err());
    }

    #[test]
    fn session_ids_are_bounded_and_printable() {
        assert!(SessionId::parse("sess_abc123").is_ok());
        assert!(SessionId::parse(&"é".repeat(MAX_SESSION_ID_LEN)).is_ok());
        assert_eq!(SessionId::parse(""), Err(InvalidId::EmptySession));
        assert_eq!(SessionId::parse(&"a".repeat(MAX_SESSION_ID_LEN + 1)), Err(InvalidId::SessionTooLong));
        assert_eq!(SessionId::parse("a\u{0}b"), Err(InvalidId::SessionControlCharacter));
    }
}
