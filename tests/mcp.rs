//! The MCP endpoint (SPEC §9) driven by the official Rust SDK's Streamable HTTP client: the
//! handshake, the tool list, and the seed's conversation through `tools/call`.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use gatehouse_tests::lifecycle::{App, Relay, lifecycle_options};
use gatehouse_tests::{TOKEN, unique};
use rmcp::model::{CallToolRequestParams, CallToolResult, ClientConfig, ErrorCode, Implementation, ProtocolVersion};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ServiceError, ServiceExt};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);

type Client = RunningService<RoleClient, ClientConfig>;

async fn connect(app: &App, token: &str, version: Option<ProtocolVersion>) -> Result<Client> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.runner.url("/mcp")).auth_header(token),
    );
    let mut config = ClientConfig::new(Default::default(), Implementation::new("gatehouse-tests", "1.0.0"));
    if let Some(version) = version {
        config = config.with_protocol_version(version);
    }
    Ok(config.serve(transport).await?)
}

async fn call(client: &Client, name: &'static str, arguments: Value) -> Result<CallToolResult> {
    let arguments = arguments.as_object().cloned().context("arguments must be an object")?;
    Ok(client.call_tool(CallToolRequestParams::new(name).with_arguments(arguments)).await?)
}

/// The structured answer of a successful call; fails the test on an error result.
async fn ok(client: &Client, name: &'static str, arguments: Value) -> Result<Value> {
    let result = call(client, name, arguments).await?;
    let body = answer(&result)?;
    if result.is_error == Some(true) {
        bail!("{name} answered an error: {body}");
    }
    Ok(body)
}

/// A result's structured content, checked against its text twin.
fn answer(result: &CallToolResult) -> Result<Value> {
    let structured = result.structured_content.clone().context("no structured content")?;
    let text: String = result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect();
    let parsed: Value = serde_json::from_str(&text).context("the text content is not the JSON answer")?;
    assert_eq!(parsed, structured, "the text and structured content differ");
    Ok(structured)
}

#[tokio::test]
async fn an_mcp_client_runs_the_seed_conversation() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0.2"])).await?;
    let relay = Relay::start().await?;
    let session = unique("mcp");

    // The SDK asks for its newest revision, which has no initialize; the server offers its own.
    let client = connect(&app, TOKEN, None).await?;
    let info = client.peer_info().context("not initialized")?;
    assert_eq!(info.protocol_version.as_str(), "2025-11-25");
    let server = info.server_info.as_ref().context("no serverInfo")?;
    assert_eq!(server.name, "gatehouse");
    assert!(info.capabilities.tools.is_some(), "tools capability");

    let tools = client.list_all_tools().await?;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel_tool",
            "confirm_tool",
            "get_context",
            "get_session_context",
            "get_status",
            "modify_tool",
            "request_tool",
            "resume_tool"
        ]
    );
    let request_tool = tools.iter().find(|t| t.name == "request_tool").context("request_tool")?;
    let schema = Value::Object((*request_tool.input_schema).clone());
    assert_eq!(schema["properties"]["function_name"]["enum"], json!(["fixture_action", "fixture_alias"]));
    assert_eq!(schema["allOf"][0]["then"]["properties"]["parameters"]["required"], json!(["to"]), "{schema}");

    // "Email John about tomorrow's meeting."
    let created = ok(
        &client,
        "request_tool",
        json!({"session_id": session, "function_name": "fixture_action", "callback_url": relay.url,
               "parameters": {"to": "john@gmail.com", "subject": "Meeting Tomorrow"}}),
    )
    .await?;
    assert_eq!(created["status"], "PENDING");
    assert_eq!(
        created["message"],
        "I'll send a message to john@gmail.com about 'Meeting Tomorrow'. Confirm to proceed."
    );
    let id = created["tool_call_id"].as_str().context("no id")?.to_owned();

    // "No, john.smith@gmail.com."
    let modified = ok(
        &client,
        "modify_tool",
        json!({"tool_call_id": id, "parameters": {"to": "john.smith@gmail.com"}, "reason": "caller corrected it"}),
    )
    .await?;
    assert_eq!(
        modified["modification_applied"],
        json!({"field": "to", "old": "john@gmail.com", "new": "john.smith@gmail.com"})
    );

    // "Yes." The call runs to its checkpoint.
    let prepared = ok(&client, "confirm_tool", json!({"tool_call_id": id, "wait_seconds": 10})).await?;
    assert_eq!(prepared["status"], "PREPARED", "{prepared}");
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    assert!(checkpoint.signature_valid);

    // "Go ahead."
    let completed =
        ok(&client, "resume_tool", json!({"tool_call_id": id, "action": "proceed", "wait_seconds": 10})).await?;
    assert_eq!(completed["status"], "COMPLETED", "{completed}");
    assert_eq!(completed["voice_response"], "Done: the message to john.smith@gmail.com was sent.");
    let status = ok(&client, "get_status", json!({"tool_call_id": id})).await?;
    assert_eq!(status["parameters"]["to"], "john.smith@gmail.com");
    let rest = app.status(&id).await?.body;
    assert_eq!(status, rest, "get_status answers what the REST route answers");

    let context = ok(&client, "get_context", json!({"session_id": session})).await?;
    assert_eq!(context["recent"][0]["status"], "COMPLETED");
    assert_eq!(context["pending"], json!([]));

    // A second request, cancelled before it runs.
    let second = ok(
        &client,
        "request_tool",
        json!({"session_id": session, "function_name": "fixture_alias", "parameters": {"to": "ann@example.com"}}),
    )
    .await?;
    let second_id = second["tool_call_id"].as_str().context("no id")?;
    let cancelled = ok(&client, "cancel_tool", json!({"tool_call_id": second_id, "reason": "not needed"})).await?;
    assert_eq!(cancelled["status"], "CANCELLED");
    assert_eq!(cancelled["message"], "Okay, I've cancelled that. Nothing was done.");

    // Refusals are tool results the agent can speak, with the routes' codes.
    let invalid = call(
        &client,
        "request_tool",
        json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "not-an-address"}}),
    )
    .await?;
    assert_eq!(invalid.is_error, Some(true));
    let refusal = answer(&invalid)?;
    assert_eq!(refusal["code"], "validation_failed");
    assert_eq!(refusal["fields"], json!([{"field": "to", "problem": "is not an email address"}]));
    assert!(refusal["error"].as_str().is_some_and(|s| s.ends_with('.')), "{refusal}");
    let too_late = answer(&call(&client, "confirm_tool", json!({"tool_call_id": second_id})).await?)?;
    assert_eq!((too_late["code"].as_str(), too_late["status"].as_str()), (Some("invalid_state"), Some("CANCELLED")));
    let missing =
        answer(&call(&client, "get_session_context", json!({"session_id": session, "context_key": "k"})).await?)?;
    assert_eq!(
        (missing["code"].as_str(), missing["error"].as_str()),
        (Some("not_found"), Some("Not found or expired"))
    );
    let unknown_argument = answer(&call(&client, "get_status", json!({"tool_call_id": id, "verbose": true})).await?)?;
    assert_eq!(unknown_argument["code"], "invalid_input");

    // An unknown tool is a protocol error.
    match client.call_tool(CallToolRequestParams::new("send_fax")).await {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code, ErrorCode::INVALID_PARAMS),
        other => bail!("expected a JSON-RPC error for an unknown tool, got {other:?}"),
    }

    // Nothing was written twice or lost: the REST view agrees with the MCP one.
    let calls = app.send(reqwest::Method::GET, &format!("/voice-tools/context/{session}"), None).await?.body;
    assert_eq!(calls["recent"].as_array().map(Vec::len), Some(2), "{calls}");
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn an_older_client_gets_its_own_version_and_a_bad_token_gets_nothing() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let client = connect(&app, TOKEN, Some(ProtocolVersion::V_2025_06_18)).await?;
    let info = client.peer_info().context("not initialized")?;
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_06_18);
    assert_eq!(client.list_all_tools().await?.len(), 8);
    client.cancel().await?;

    assert!(connect(&app, "wrong-token", None).await.is_err(), "a wrong token must not initialize");
    Ok(())
}
