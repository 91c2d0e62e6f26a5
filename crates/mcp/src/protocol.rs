//! Protocol versions and `initialize`.

use serde_json::{Value, json};

/// The MCP revisions this server speaks, newest first. Over this server's surface (tools
/// only, no sessions, no server-to-client requests) they differ in nothing it sends.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The revision a client without an `MCP-Protocol-Version` header is assumed to speak.
const ASSUMED_VERSION: &str = "2025-03-26";

/// The version to speak: the client's if this server knows it, else the newest it knows, which
/// the client may then refuse (version negotiation in `initialize`).
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|requested| SUPPORTED_VERSIONS.into_iter().find(|known| *known == requested))
        .unwrap_or(SUPPORTED_VERSIONS[0])
}

/// Whether a request's `MCP-Protocol-Version` header names a version this server speaks.
pub fn header_supported(header: Option<&str>) -> bool {
    SUPPORTED_VERSIONS.contains(&header.unwrap_or(ASSUMED_VERSION).trim())
}

pub fn initialize_result(params: &Value, server_version: &str) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "gatehouse", "title": "Gatehouse", "version": server_version},
        "instructions": "Every action with a side effect is held first: request_tool records it as PENDING and \
            answers the sentence to read back to the caller. Correct it with modify_tool, run it with confirm_tool \
            once the caller agrees, or drop it with cancel_tool. A tool with a checkpoint stops at PREPARED; \
            resume_tool with action proceed or cancel decides. get_status and get_context tell where things stand. \
            Speak the message or voice_response of each answer.",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speaks_the_clients_version_when_it_can() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some("1999-01-01")), SUPPORTED_VERSIONS[0]);
        assert_eq!(negotiate(None), SUPPORTED_VERSIONS[0]);
    }

    #[test]
    fn checks_the_version_header() {
        assert!(header_supported(None));
        assert!(header_supported(Some("2025-06-18")));
        assert!(!header_supported(Some("2099-01-01")));
    }
}
