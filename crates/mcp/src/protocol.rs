//! Protocol versions, and which revision a request speaks.
//!
//! Two eras share `POST /mcp`. A request that names 2026-07-28, in its `MCP-Protocol-Version`
//! header or in `_meta`, is served statelessly by that revision: its `_meta` must carry the
//! protocol version and the client's capabilities, and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers must repeat the body. Anything else is the legacy
//! revisions' traffic (`initialize`, then requests with the negotiated version's header, or
//! none before 2025-06-18), which this server also answers without a session. A version this
//! server does not know, in the header or in `_meta`, is refused with the ones it does.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use rmcp::model::{DiscoverResult, Implementation, ProtocolVersion, ServerCapabilities, ToolsCapability};
use serde_json::{Map, Value, json};

use crate::jsonrpc::{HEADER_MISMATCH, INVALID_PARAMS, RpcError, UNSUPPORTED_VERSION};

/// The stateless revision: per-request `_meta`, `server/discover`, no `initialize`.
pub const MODERN_VERSION: &str = "2026-07-28";

/// The MCP revisions this server speaks, newest first. The legacy ones differ in nothing this
/// server sends (tools only, no sessions, no server-to-client requests).
pub const SUPPORTED_VERSIONS: [&str; 5] = [MODERN_VERSION, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The newest revision with an `initialize` handshake: what `initialize` offers a client
/// that asks for one this server does not know.
const NEWEST_LEGACY: &str = "2025-11-25";

pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// This server's own `_meta` key: the voice session a registry tool's call belongs to.
pub const META_SESSION_ID: &str = "dev.gatehouse/sessionId";

pub const TASKS_EXTENSION: &str = rmcp::model::TASKS_EXTENSION_ID;

const INSTRUCTIONS: &str = "Every action with a side effect is held first: request_tool records it as PENDING and \
    answers the sentence to read back to the caller. Correct it with modify_tool, run it with confirm_tool once \
    the caller agrees, or drop it with cancel_tool. A tool with a checkpoint stops at PREPARED; resume_tool with \
    action proceed or cancel decides. get_status and get_context tell where things stand. Speak the message or \
    voice_response of each answer.";

const MODERN_INSTRUCTIONS: &str = " Under 2026-07-28 the registered tools are also tools of their own: calling \
    one records the call and asks the user, through an elicitation, to confirm the sentence it reads back (and \
    again at a checkpoint); confirm_tool and resume_tool answer a task (Tasks extension) whose id is the call's.";

/// The headers that repeat a request's body, as the transport carries them.
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    pub protocol_version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// How one request is to be served.
#[derive(Debug, PartialEq)]
pub enum Era {
    /// 2025-11-25 and older: `initialize` negotiates, later requests carry only the header.
    Legacy,
    /// 2026-07-28, with the capabilities the client declared on this request.
    Modern { capabilities: Map<String, Value> },
}

impl Era {
    /// Whether the client declared the Tasks extension on this request.
    pub fn tasks(&self) -> bool {
        self.declared(|capabilities| capabilities.get("extensions")?.get(TASKS_EXTENSION))
    }

    /// Whether the client declared form elicitation on this request.
    pub fn elicitation(&self) -> bool {
        self.declared(|capabilities| capabilities.get("elicitation"))
    }

    fn declared(&self, find: impl Fn(&Map<String, Value>) -> Option<&Value>) -> bool {
        match self {
            Era::Legacy => false,
            Era::Modern { capabilities } => find(capabilities).is_some_and(Value::is_object),
        }
    }
}

/// A notification's check: the only rule for one is that the version it names is known (the
/// revision defines no header requirements for notifications).
pub fn known_version(headers: Headers) -> Result<(), RpcError> {
    match headers.protocol_version.map(str::trim) {
        Some(requested) if !SUPPORTED_VERSIONS.contains(&requested) => Err(unsupported(requested)),
        _ => Ok(()),
    }
}

/// Which revision a request speaks, after checking what that revision requires of it.
pub fn era(headers: Headers, method: &str, params: &Value) -> Result<Era, RpcError> {
    known_version(headers)?;
    let header_version = headers.protocol_version.map(str::trim);
    let meta_version = params.get("_meta").and_then(|meta| meta.get(META_PROTOCOL_VERSION));
    if let Some(requested) = meta_version.and_then(Value::as_str).filter(|v| !SUPPORTED_VERSIONS.contains(v)) {
        return Err(unsupported(requested));
    }
    let modern = header_version == Some(MODERN_VERSION)
        || meta_version.is_some_and(|version| !is_legacy(version))
        || method == "server/discover";
    if !modern {
        return Ok(Era::Legacy);
    }
    let capabilities = request_meta(params)?;
    check_headers(headers, method, params)?;
    Ok(Era::Modern { capabilities })
}

fn is_legacy(version: &Value) -> bool {
    version.as_str().is_some_and(|version| SUPPORTED_VERSIONS[1..].contains(&version))
}

/// The per-request fields 2026-07-28 requires in `_meta`: the protocol version and the
/// client's capabilities, each of the right type. The shape is checked before any member.
fn request_meta(params: &Value) -> Result<Map<String, Value>, RpcError> {
    let malformed = |why: &str| RpcError::new(INVALID_PARAMS, why.to_owned()).with_status(400);
    let Value::Object(params) = params else {
        return Err(malformed("A 2026-07-28 request needs params: an object carrying _meta."));
    };
    let Some(Value::Object(meta)) = params.get("_meta") else {
        return Err(malformed(
            "A 2026-07-28 request needs _meta: an object with the protocol version and client capabilities.",
        ));
    };
    // Its value was checked against the known versions already; that it is the header's is
    // the transport's rule, checked next.
    if !meta.get(META_PROTOCOL_VERSION).is_some_and(Value::is_string) {
        return Err(malformed("_meta needs io.modelcontextprotocol/protocolVersion, a string."));
    }
    match meta.get(META_CLIENT_CAPABILITIES) {
        Some(Value::Object(capabilities)) => Ok(capabilities.clone()),
        _ => Err(malformed("_meta needs io.modelcontextprotocol/clientCapabilities, an object.")),
    }
}

/// The transport's rule: the headers must be present and say what the body says.
fn check_headers(headers: Headers, method: &str, params: &Value) -> Result<(), RpcError> {
    let mismatch = |why: String| RpcError::new(HEADER_MISMATCH, format!("Header mismatch: {why}")).with_status(400);
    let in_meta = params.pointer("/_meta").and_then(|meta| meta.get(META_PROTOCOL_VERSION)).and_then(Value::as_str);
    match (headers.protocol_version.map(str::trim), in_meta) {
        (Some(header), Some(body)) if header == body => {}
        (Some(header), body) => {
            let body = body.unwrap_or("nothing");
            return Err(mismatch(format!("MCP-Protocol-Version {header} does not match _meta's {body}")));
        }
        (None, _) => return Err(mismatch("the MCP-Protocol-Version header is required".to_owned())),
    }
    match headers.method {
        Some(header) if header == method => {}
        Some(header) => return Err(mismatch(format!("Mcp-Method '{header}' does not match the body's '{method}'"))),
        None => return Err(mismatch("the Mcp-Method header is required".to_owned())),
    }
    // `Mcp-Name` repeats the tool's name, or a task method's task id (the Tasks extension).
    let source = match method {
        "tools/call" => "name",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return Ok(()),
    };
    let Some(Value::String(body)) = params.get(source) else {
        return Err(RpcError::new(INVALID_PARAMS, format!("{method} needs {source}, a string.")).with_status(400));
    };
    match headers.name.map(decode_header_value) {
        Some(Some(header)) if header == *body => {}
        Some(Some(header)) => return Err(mismatch(format!("Mcp-Name '{header}' does not match the body's '{body}'"))),
        Some(None) => return Err(mismatch("the Mcp-Name header is not a valid value".to_owned())),
        None => return Err(mismatch(format!("the Mcp-Name header is required for {method}"))),
    }
    Ok(())
}

/// A header value as sent: plain, or `=?base64?…?=` around the UTF-8 bytes in Base64.
fn decode_header_value(value: &str) -> Option<String> {
    match value.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        Some(encoded) => String::from_utf8(BASE64.decode(encoded).ok()?).ok(),
        None => Some(value.to_owned()),
    }
}

/// `UnsupportedProtocolVersionError`: what was asked, and what this server speaks.
fn unsupported(requested: &str) -> RpcError {
    RpcError::new(UNSUPPORTED_VERSION, "Unsupported protocol version")
        .with_data(json!({"supported": SUPPORTED_VERSIONS, "requested": requested}))
        .with_status(400)
}

/// The version to speak in `initialize`: the client's if this server knows it and it has a
/// handshake, else the newest that has one, which the client may then refuse.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|requested| SUPPORTED_VERSIONS[1..].iter().copied().find(|known| *known == requested))
        .unwrap_or(NEWEST_LEGACY)
}

pub fn initialize_result(params: &Value, server_version: &str) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    json!({
        "protocolVersion": negotiate(requested),
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": server_info(server_version),
        "instructions": INSTRUCTIONS,
    })
}

fn server_info(server_version: &str) -> Implementation {
    let mut info = Implementation::new("gatehouse", server_version);
    info.title = Some("Gatehouse".to_owned());
    info
}

/// `server/discover`: every version, the tools, the Tasks extension. Behind a bearer token,
/// so private to the client that asked; it changes only with a deployment.
pub fn discover_result(server_version: &str) -> Value {
    let versions: Vec<ProtocolVersion> = serde_json::from_value(json!(SUPPORTED_VERSIONS)).unwrap_or_default();
    let mut capabilities = ServerCapabilities::default();
    capabilities.tools = Some(ToolsCapability::default());
    capabilities.extensions = Some([(TASKS_EXTENSION.to_owned(), Map::new())].into_iter().collect());
    let mut result =
        DiscoverResult::new(versions, capabilities).with_ttl_ms(60_000).with_server_info(server_info(server_version));
    result.instructions = Some(format!("{INSTRUCTIONS}{MODERN_INSTRUCTIONS}"));
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// A 2026-07-28 result's `resultType`: `complete` unless it says otherwise.
pub fn complete(mut result: Value) -> Value {
    if let Value::Object(object) = &mut result {
        object.entry("resultType").or_insert_with(|| json!("complete"));
    }
    result
}

/// A 2026-07-28 answer: [`complete`], and this server's identity in `_meta`.
pub fn modern_result(result: Value, server_version: &str) -> Value {
    let mut result = complete(result);
    if let Value::Object(object) = &mut result {
        let meta = object.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(
                META_SERVER_INFO.to_owned(),
                serde_json::to_value(server_info(server_version)).unwrap_or_default(),
            );
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern_meta() -> Value {
        json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION, META_CLIENT_CAPABILITIES: {}}})
    }

    fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Headers<'a> {
        Headers { protocol_version: Some(MODERN_VERSION), method: Some(method), name }
    }

    #[test]
    fn speaks_the_clients_legacy_version_when_it_can() {
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some(MODERN_VERSION)), NEWEST_LEGACY, "2026-07-28 has no initialize");
        assert_eq!(negotiate(Some("1999-01-01")), NEWEST_LEGACY);
        assert_eq!(negotiate(None), NEWEST_LEGACY);
    }

    #[test]
    fn an_unknown_version_is_refused_with_the_known_ones() {
        let unknown = Headers { protocol_version: Some("2099-01-01"), ..Headers::default() };
        let error = era(unknown, "tools/list", &Value::Null).expect_err("refused");
        assert_eq!((error.code, error.http_status), (UNSUPPORTED_VERSION, 400));
        assert_eq!(error.data.expect("data")["supported"], json!(SUPPORTED_VERSIONS));
        // A client older than the header (2025-03-26 and before) sends none.
        assert_eq!(era(Headers::default(), "tools/list", &Value::Null), Ok(Era::Legacy));
    }

    #[test]
    fn the_era_is_chosen_per_request() {
        let legacy = Headers { protocol_version: Some("2025-11-25"), ..Headers::default() };
        assert_eq!(era(legacy, "tools/list", &Value::Null), Ok(Era::Legacy));
        assert_eq!(era(Headers::default(), "initialize", &json!({})), Ok(Era::Legacy));
        let modern = era(headers("tools/list", None), "tools/list", &modern_meta());
        assert_eq!(modern, Ok(Era::Modern { capabilities: Map::new() }));
    }

    #[test]
    fn modern_requests_need_their_meta_and_headers() {
        let code = |headers: Headers, method: &str, params: Value| {
            era(headers, method, &params).err().map(|e| (e.code, e.http_status))
        };
        assert_eq!(code(headers("tools/list", None), "tools/list", json!({})), Some((INVALID_PARAMS, 400)));
        assert_eq!(code(headers("tools/list", None), "tools/list", json!([1])), Some((INVALID_PARAMS, 400)));
        assert_eq!(code(headers("tools/list", None), "tools/list", json!({"_meta": []})), Some((INVALID_PARAMS, 400)));
        let no_capabilities = json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}});
        assert_eq!(code(headers("tools/list", None), "tools/list", no_capabilities), Some((INVALID_PARAMS, 400)));
        let wrong_version = json!({"_meta": {META_PROTOCOL_VERSION: "2031-01-01", META_CLIENT_CAPABILITIES: {}}});
        assert_eq!(code(headers("tools/list", None), "tools/list", wrong_version), Some((UNSUPPORTED_VERSION, 400)));
        assert_eq!(code(headers("tools/call", None), "tools/list", modern_meta()), Some((HEADER_MISMATCH, 400)));
        let mut call = modern_meta();
        call["name"] = json!("get_status");
        assert_eq!(code(headers("tools/call", None), "tools/call", call.clone()), Some((HEADER_MISMATCH, 400)));
        assert_eq!(
            code(headers("tools/call", Some("get_context")), "tools/call", call.clone()),
            Some((HEADER_MISMATCH, 400))
        );
        assert!(era(headers("tools/call", Some("get_status")), "tools/call", &call).is_ok());
        let encoded = "=?base64?Z2V0X3N0YXR1cw==?=";
        assert!(era(headers("tools/call", Some(encoded)), "tools/call", &call).is_ok());
        let legacy_in_meta = json!({"_meta": {META_PROTOCOL_VERSION: "2025-11-25", META_CLIENT_CAPABILITIES: {}}});
        assert_eq!(code(headers("tools/list", None), "tools/list", legacy_in_meta), Some((HEADER_MISMATCH, 400)));
        let mut task = modern_meta();
        task["taskId"] = json!("tc_0123456789ab");
        assert_eq!(code(headers("tasks/get", None), "tasks/get", task.clone()), Some((HEADER_MISMATCH, 400)));
        assert!(era(headers("tasks/get", Some("tc_0123456789ab")), "tasks/get", &task).is_ok());
        let no_header = Headers { protocol_version: None, method: Some("tools/list"), name: None };
        assert_eq!(code(no_header, "tools/list", modern_meta()), Some((HEADER_MISMATCH, 400)));
    }

    #[test]
    fn base64_header_values() {
        assert_eq!(decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?=").as_deref(), Some("Hello, 世界"));
        assert_eq!(decode_header_value("=?base64?IHBhZGRlZCA=?=").as_deref(), Some(" padded "));
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
        assert_eq!(decode_header_value("=?base64?!!!?="), None);
    }
}
