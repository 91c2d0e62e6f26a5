//! The MCP endpoint (docs/architecture.md, "MCP") driven by the official Rust SDK's Streamable HTTP
//! client, in both eras: the legacy handshake, and 2026-07-28 (discovery, output schemas,
//! `input_required` confirmation of a registry tool, tasks); then raw HTTP for the 2026-07-28 rules
//! the SDK never breaks.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use gatehouse_tests::gmail::{GMAIL_REGISTRY, GmailApp};
use gatehouse_tests::lifecycle::{App, Relay, lifecycle_options};
use gatehouse_tests::{TOKEN, unique};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ErrorCode, GetTaskParams, GetTaskResult, Implementation, ProtocolVersion,
    TaskStatus, Tool, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceError, ServiceExt};
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

// ---------------------------------------------------------------------------------------------
// 2026-07-28: discovery, per-request _meta, input_required, tasks.

const MODERN: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 client: what it answers when asked to confirm (one answer per question, in
/// order; `true` accepts), and every question it was asked.
#[derive(Clone, Default)]
struct Voice {
    answers: Arc<Mutex<VecDeque<bool>>>,
    asked: Arc<Mutex<Vec<String>>>,
    tasks: bool,
}

impl Voice {
    fn answering(answers: &[bool]) -> Voice {
        Voice { answers: Arc::new(Mutex::new(answers.iter().copied().collect())), ..Voice::default() }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().map(|asked| asked.clone()).unwrap_or_default()
    }
}

impl ClientHandler for Voice {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } = request else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        if let Ok(mut asked) = self.asked.lock() {
            asked.push(message);
        }
        let yes = self.answers.lock().ok().and_then(|mut answers| answers.pop_front()).unwrap_or(false);
        let field = requested_schema.required.as_ref().and_then(|r| r.first().cloned()).unwrap_or_default();
        Ok(if yes {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({field: true}))
        } else {
            ElicitResult::new(ElicitationAction::Decline)
        })
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = json!({"elicitation": {"form": {}}});
        if self.tasks {
            capabilities["extensions"] = json!({TASKS: {}});
        }
        let capabilities = serde_json::from_value(capabilities).unwrap_or_default();
        ClientConfig::new(capabilities, Implementation::new("gatehouse-tests", "1.0.0"))
    }
}

type ModernClient = RunningService<RoleClient, Voice>;

async fn discover(app: &App, voice: Voice, preferred: Vec<ProtocolVersion>) -> Result<ModernClient> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.runner.url("/mcp")).auth_header(TOKEN),
    );
    Ok(voice.serve_with_lifecycle(transport, ClientLifecycleMode::Discover { preferred_versions: preferred }).await?)
}

/// Every tool's output schema, compiled.
fn output_validators(tools: &[Tool]) -> Result<HashMap<String, jsonschema::Validator>> {
    let mut validators = HashMap::new();
    for tool in tools {
        let schema = tool.output_schema.as_ref().with_context(|| format!("{} has no outputSchema", tool.name))?;
        let schema = Value::Object((**schema).clone());
        assert!(jsonschema::draft202012::meta::is_valid(&schema), "{}'s outputSchema is not 2020-12", tool.name);
        let validator = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .map_err(|e| anyhow::anyhow!("{}'s outputSchema does not compile: {e}", tool.name))?;
        validators.insert(tool.name.to_string(), validator);
    }
    Ok(validators)
}

/// A result's structured content, valid against its tool's output schema.
fn checked(validators: &HashMap<String, jsonschema::Validator>, tool: &str, result: &CallToolResult) -> Result<Value> {
    let body = answer(result)?;
    let validator = validators.get(tool).with_context(|| format!("no schema for {tool}"))?;
    let errors: Vec<String> = validator.iter_errors(&body).map(|e| format!("{} at {}", e, e.instance_path())).collect();
    assert!(errors.is_empty(), "{tool}'s structuredContent does not match its outputSchema: {errors:?}\n{body}");
    Ok(body)
}

async fn modern_call(client: &ModernClient, name: &str, arguments: Value) -> Result<CallToolResult> {
    let arguments = arguments.as_object().cloned().context("arguments must be an object")?;
    Ok(client.call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments)).await?)
}

#[tokio::test]
async fn a_2026_07_28_client_discovers_lists_and_runs_the_seed_conversation() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &["--sweep-interval", "0.2"])).await?;
    let session = unique("mcp-modern");

    // The SDK first asks for a version this server does not know: UnsupportedProtocolVersion
    // lists the ones it does, and the SDK settles on 2026-07-28. No initialize is sent.
    let preferred =
        vec![serde_json::from_value::<ProtocolVersion>(json!("2031-01-01"))?, ProtocolVersion::V_2026_07_28];
    let client = discover(&app, Voice::answering(&[true, true]), preferred).await?;
    let info = client.peer_info().context("not discovered")?;
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(info.server_info.as_ref().map(|s| s.name.as_str()), Some("gatehouse"));
    assert!(info.capabilities.tools.is_some(), "tools capability");
    assert!(info.capabilities.supports_tasks(), "the Tasks extension");

    let tools = client.list_all_tools().await?;
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "cancel_tool",
            "confirm_tool",
            "fixture_action",
            "get_context",
            "get_session_context",
            "get_status",
            "modify_tool",
            "request_tool",
            "resume_tool"
        ]
    );
    let validators = output_validators(&tools)?;
    for tool in &tools {
        let hints = tool.annotations.as_ref().with_context(|| format!("{} has no annotations", tool.name))?;
        let read_only = hints.read_only_hint == Some(true);
        assert_eq!(read_only, tool.name.starts_with("get_"), "{}: readOnlyHint", tool.name);
        // Every operation says all four; the fixture says nothing of its effects, so only that
        // it writes is claimed, and the rest is left to the hints' cautious defaults.
        let all_four =
            hints.destructive_hint.is_some() && hints.idempotent_hint.is_some() && hints.open_world_hint.is_some();
        assert_eq!(all_four, tool.name != "fixture_action", "{}: {hints:?}", tool.name);
    }
    let hints = |name: &str| tools.iter().find(|t| t.name == name).and_then(|t| t.annotations.clone());
    assert_eq!(hints("confirm_tool").and_then(|h| h.destructive_hint), Some(true));
    assert_eq!(hints("request_tool").and_then(|h| h.destructive_hint), Some(false));
    assert_eq!(hints("get_status").and_then(|h| h.destructive_hint), Some(false));
    let fixture = tools.iter().find(|t| t.name == "fixture_action").context("fixture_action")?;
    assert_eq!(Value::Object((*fixture.input_schema).clone())["required"], json!(["to"]));

    // The seed conversation through the lifecycle tools, each answer valid against its schema.
    let created = modern_call(
        &client,
        "request_tool",
        json!({"session_id": session, "function_name": "fixture_action",
               "parameters": {"to": "john@gmail.com", "subject": "Meeting Tomorrow"}}),
    )
    .await?;
    let created = checked(&validators, "request_tool", &created)?;
    let id = created["tool_call_id"].as_str().context("no id")?.to_owned();
    let modified =
        modern_call(&client, "modify_tool", json!({"tool_call_id": id, "parameters": {"to": "john.smith@gmail.com"}}))
            .await?;
    checked(&validators, "modify_tool", &modified)?;
    let prepared = modern_call(&client, "confirm_tool", json!({"tool_call_id": id, "wait_seconds": 10})).await?;
    assert_eq!(checked(&validators, "confirm_tool", &prepared)?["status"], "PREPARED");
    let completed =
        modern_call(&client, "resume_tool", json!({"tool_call_id": id, "action": "proceed", "wait_seconds": 10}))
            .await?;
    let completed = checked(&validators, "resume_tool", &completed)?;
    assert_eq!(completed["voice_response"], "Done: the message to john.smith@gmail.com was sent.");
    checked(&validators, "get_status", &modern_call(&client, "get_status", json!({"tool_call_id": id})).await?)?;
    checked(&validators, "get_context", &modern_call(&client, "get_context", json!({"session_id": session})).await?)?;
    let missing =
        modern_call(&client, "get_session_context", json!({"session_id": session, "context_key": "k"})).await?;
    assert_eq!(checked(&validators, "get_session_context", &missing)?["code"], "not_found");
    let second = modern_call(
        &client,
        "request_tool",
        json!({"session_id": session, "function_name": "fixture_alias", "parameters": {"to": "ann@example.com"}}),
    )
    .await?;
    let second_id = checked(&validators, "request_tool", &second)?["tool_call_id"].clone();
    let cancelled = modern_call(&client, "cancel_tool", json!({"tool_call_id": second_id})).await?;
    assert_eq!(checked(&validators, "cancel_tool", &cancelled)?["status"], "CANCELLED");
    let refused = modern_call(&client, "confirm_tool", json!({"tool_call_id": second_id})).await?;
    assert_eq!(refused.is_error, Some(true));
    assert_eq!(checked(&validators, "confirm_tool", &refused)?["code"], "invalid_state");

    // The registry tool itself: created, confirmed in an elicitation with the sentence the
    // tool reads back, asked again at the checkpoint, sent.
    let arguments = json!({"to": "john.smith@gmail.com", "subject": "Meeting Tomorrow"});
    let sent = modern_call(&client, "fixture_action", arguments).await?;
    let sent = checked(&validators, "fixture_action", &sent)?;
    assert_eq!(sent["status"], "COMPLETED", "{sent}");
    assert_eq!(sent["session_id"], "mcp", "no session named in _meta");
    let asked = client.service().asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert_eq!(asked[0], "I'll send a message to john.smith@gmail.com about 'Meeting Tomorrow'. Confirm to proceed.");
    let call = app.status(sent["tool_call_id"].as_str().context("id")?).await?.body;
    let history: Vec<&str> =
        call["status_history"].as_array().into_iter().flatten().filter_map(|h| h["status"].as_str()).collect();
    assert!(history.contains(&"PREPARED") && history.ends_with(&["COMPLETED"]), "{history:?}");
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn a_registry_tool_is_cancelled_when_the_user_says_no_at_either_question() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let arguments = json!({"to": "ann@example.com"});

    // "No" when asked to confirm: the call is cancelled before anything ran.
    let client = discover(&app, Voice::answering(&[false]), vec![ProtocolVersion::V_2026_07_28]).await?;
    let result = modern_call(&client, "fixture_action", arguments.clone()).await?;
    let body = answer(&result)?;
    assert_eq!((result.is_error, body["status"].as_str()), (Some(false), Some("CANCELLED")), "{body}");
    let call = app.status(body["tool_call_id"].as_str().context("id")?).await?.body;
    assert!(call["confirmed_at"].is_null(), "{call}");
    client.cancel().await?;

    // "Yes", then "no" at the checkpoint: cancelled there, what was prepared is discarded.
    let client = discover(&app, Voice::answering(&[true, false]), vec![ProtocolVersion::V_2026_07_28]).await?;
    let result = modern_call(&client, "fixture_action", arguments).await?;
    let body = answer(&result)?;
    assert_eq!(body["status"], "CANCELLED", "{body}");
    let call = app.status(body["tool_call_id"].as_str().context("id")?).await?.body;
    assert!(call["prepared_at"].is_string() && call["side_effect_started_at"].is_null(), "{call}");
    assert_eq!(client.service().asked().len(), 2);
    client.cancel().await?;
    Ok(())
}

async fn poll(client: &ModernClient, task_id: &str, until: impl Fn(&GetTaskResult) -> bool) -> Result<GetTaskResult> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let task = client.get_task(GetTaskParams::new(task_id)).await?;
        if until(&task) {
            return Ok(task);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("task {task_id} stayed {:?}", task.task.status());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn accept(field: &str) -> Value {
    json!({"action": "accept", "content": {field: true}})
}

#[tokio::test]
async fn tasks_follow_a_registry_call_through_its_checkpoint_and_cancels_are_truthful() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let voice = Voice { tasks: true, ..Voice::default() };
    let client = discover(&app, voice, vec![ProtocolVersion::V_2026_07_28]).await?;
    let tools = client.list_all_tools().await?;
    let validators = output_validators(&tools)?;

    // The registry tool, driven round by round: input_required, then the user's yes, which
    // answers a task whose id is the call's.
    let params = CallToolRequestParams::new("fixture_action")
        .with_arguments(json!({"to": "john@gmail.com"}).as_object().cloned().context("object")?);
    let CallToolResponse::InputRequired(asked) = client.call_tool_once(params.clone()).await? else {
        bail!("the first round must ask to confirm");
    };
    let requests = serde_json::to_value(&asked.input_requests)?;
    assert_eq!(requests["confirm"]["params"]["message"], "I'll send a message to john@gmail.com. Confirm to proceed.");
    let mut retry = params.clone();
    retry.input_responses = Some([("confirm".to_owned(), accept("confirm"))].into_iter().collect());
    retry.request_state = asked.request_state.clone();
    let CallToolResponse::Task(created) = client.call_tool_once(retry).await? else {
        bail!("a confirmed call answers a task to a client that takes them");
    };
    let task_id = created.task.task_id.clone();
    assert!(task_id.starts_with("tc_"), "the task id is the call's: {task_id}");

    // PREPARED is input_required, asking the checkpoint's question; tasks/update answers it.
    let at_checkpoint = poll(&client, &task_id, |t| t.task.status() == TaskStatus::InputRequired).await?;
    let wire = serde_json::to_value(&at_checkpoint)?;
    assert_eq!(wire["inputRequests"]["proceed"]["method"], "elicitation/create", "{wire}");
    assert_eq!(app.status(&task_id).await?.body["status"], "PREPARED");
    client
        .update_task(UpdateTaskParams::new(
            task_id.clone(),
            [("proceed".to_owned(), accept("proceed"))].into_iter().collect(),
        ))
        .await?;
    let done = poll(&client, &task_id, |t| t.task.status().is_terminal()).await?;
    let wire = serde_json::to_value(&done)?;
    assert_eq!(wire["status"], "completed", "{wire}");
    assert_eq!(wire["result"]["structuredContent"]["status"], "COMPLETED");
    let result: CallToolResult = serde_json::from_value(wire["result"].clone())?;
    checked(&validators, "fixture_action", &result)?;

    // confirm_tool answers a task too; a cancel at the checkpoint, before the side effect, wins.
    let id = app.create_id(&unique("task"), json!({"to": "a@example.com"}), None).await?;
    let confirmed = client
        .call_tool_once(
            CallToolRequestParams::new("confirm_tool")
                .with_arguments(json!({"tool_call_id": id}).as_object().cloned().context("object")?),
        )
        .await?;
    let CallToolResponse::Task(task) = confirmed else { bail!("confirm_tool must answer a task") };
    assert_eq!(task.task.task_id, id);
    poll(&client, &id, |t| t.task.status() == TaskStatus::InputRequired).await?;
    client.cancel_task(CancelTaskParams::new(id.clone())).await?;
    assert_eq!(poll(&client, &id, |t| t.task.status().is_terminal()).await?.task.status(), TaskStatus::Cancelled);
    assert_eq!(app.status(&id).await?.body["status"], "CANCELLED");

    // Once the irreversible step has started, the cancel is refused and says why.
    let params = json!({"to": "b@example.com", "checkpoint": false, "delay_ms": {"execute": 1500}});
    let id = app.create_id(&unique("task"), params, None).await?;
    let CallToolResponse::Task(task) = client
        .call_tool_once(
            CallToolRequestParams::new("confirm_tool")
                .with_arguments(json!({"tool_call_id": id}).as_object().cloned().context("object")?),
        )
        .await?
    else {
        bail!("confirm_tool must answer a task");
    };
    assert_eq!(task.task.status, TaskStatus::Working);
    for _ in 0..250 {
        if app.status(&id).await?.body["side_effect_started_at"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    match client.cancel_task(CancelTaskParams::new(id.clone())).await {
        Err(ServiceError::McpError(error)) => {
            assert_eq!(error.code.0, -31000, "{error:?}");
            let data = error.data.context("the refusal's data")?;
            assert_eq!(
                (data["code"].as_str(), data["status"].as_str()),
                (Some("side_effect_started"), Some("EXECUTING"))
            );
            assert!(!error.message.is_empty());
        }
        other => bail!("a cancel after the side effect started must be refused, got {other:?}"),
    }
    let done = poll(&client, &id, |t| t.task.status().is_terminal()).await?;
    assert_eq!(done.task.status(), TaskStatus::Completed);

    // A tool that fails is a completed task whose result is the call, isError: `failed` is the
    // extension's for JSON-RPC errors only.
    let params = json!({"to": "c@example.com", "checkpoint": false, "fail_in": "execute"});
    let id = app.create_id(&unique("task"), params, None).await?;
    client
        .call_tool_once(
            CallToolRequestParams::new("confirm_tool")
                .with_arguments(json!({"tool_call_id": id}).as_object().cloned().context("object")?),
        )
        .await?;
    let failed = serde_json::to_value(poll(&client, &id, |t| t.task.status().is_terminal()).await?)?;
    assert_eq!(
        (failed["status"].as_str(), failed["result"]["isError"].as_bool()),
        (Some("completed"), Some(true)),
        "{failed}"
    );
    assert_eq!(failed["result"]["structuredContent"]["status"], "FAILED");
    client.cancel().await?;
    Ok(())
}

#[tokio::test]
async fn both_eras_share_the_endpoint() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    // A dual-era client probes with server/discover and stays modern.
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(app.runner.url("/mcp")).auth_header(TOKEN),
    );
    let auto = ClientLifecycleMode::Auto {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        legacy_version: Some(ProtocolVersion::V_2025_11_25),
    };
    let client = Voice::default().serve_with_lifecycle(transport, auto).await?;
    assert_eq!(client.peer_info().context("peer")?.protocol_version, ProtocolVersion::V_2026_07_28);
    assert_eq!(client.list_all_tools().await?.len(), 9, "the eight, and the fixture's registered tool");
    client.cancel().await?;
    // A legacy client on the same endpoint, at the same time, still gets the handshake.
    let legacy = connect(&app, TOKEN, Some(ProtocolVersion::V_2025_11_25)).await?;
    assert_eq!(legacy.peer_info().context("peer")?.protocol_version, ProtocolVersion::V_2025_11_25);
    assert_eq!(legacy.list_all_tools().await?.len(), 8, "registry tools need 2026-07-28's input_required");
    legacy.cancel().await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The 2026-07-28 rules the SDK never breaks, over raw HTTP.

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": MODERN,
           "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
           "io.modelcontextprotocol/clientCapabilities": {}})
}

async fn raw(app: &App, headers: &[(&str, &str)], body: Value) -> Result<gatehouse_tests::lifecycle::Answer> {
    let mut all = vec![("accept", "application/json, text/event-stream")];
    all.extend_from_slice(headers);
    app.send_with(reqwest::Method::POST, "/mcp", Some(body), &all).await
}

/// A well-formed 2026-07-28 request: the headers repeat the body.
pub(crate) async fn modern(app: &App, method: &str, mut params: Value) -> Result<gatehouse_tests::lifecycle::Answer> {
    params["_meta"] = meta();
    let name = params.get("name").or_else(|| params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = name.as_deref() {
        headers.push(("mcp-name", name));
    }
    raw(app, &headers, json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})).await
}

fn code(answer: &gatehouse_tests::lifecycle::Answer) -> (u16, Option<i64>) {
    (answer.status, answer.body["error"]["code"].as_i64())
}

#[tokio::test]
async fn the_2026_07_28_rules_over_raw_http() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;

    // Discovery without initialize; no session is minted.
    let discovered = modern(&app, "server/discover", json!({})).await?;
    assert_eq!(discovered.status, 200, "{:?}", discovered.body);
    let result = &discovered.body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"][0], MODERN);
    assert!(result["supportedVersions"].as_array().is_some_and(|v| v.contains(&json!("2025-11-25"))));
    assert_eq!(result["capabilities"]["extensions"][TASKS], json!({}));
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "gatehouse");
    assert!(result["ttlMs"].is_u64() && result["cacheScope"] == "private", "{result}");
    assert!(discovered.headers.get("mcp-session-id").is_none());

    let listed = modern(&app, "tools/list", json!({})).await?;
    assert_eq!(listed.body["result"]["resultType"], "complete");
    assert_eq!(listed.body["result"]["cacheScope"], "private");
    let tools = listed.body["result"]["tools"].as_array().context("tools")?;
    assert!(tools.iter().all(|t| t["outputSchema"]["type"] == "object"), "every tool has an outputSchema");

    // A tool call with _meta and the headers, no session: a complete result.
    let id = app.create_id(&unique("raw"), json!({"to": "a@example.com"}), None).await?;
    let status = modern(&app, "tools/call", json!({"name": "get_status", "arguments": {"tool_call_id": id}})).await?;
    assert_eq!(status.status, 200);
    assert_eq!(status.body["result"]["resultType"], "complete");
    assert_eq!(status.body["result"]["structuredContent"]["status"], "PENDING");
    // The Base64 form of Mcp-Name is read as the name it encodes.
    let mut body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_status", "arguments": {"tool_call_id": id}, "_meta": meta()}});
    let encoded =
        [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?Z2V0X3N0YXR1cw==?=")];
    assert_eq!(raw(&app, &encoded, body.clone()).await?.status, 200);

    // Header mismatches: -32020, 400.
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list"), ("mcp-name", "get_status")];
    assert_eq!(code(&raw(&app, &headers, body.clone()).await?), (400, Some(-32020)), "Mcp-Method differs");
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "get_context")];
    assert_eq!(code(&raw(&app, &headers, body.clone()).await?), (400, Some(-32020)), "Mcp-Name differs");
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call")];
    assert_eq!(code(&raw(&app, &headers, body.clone()).await?), (400, Some(-32020)), "Mcp-Name missing");
    let headers = [("mcp-method", "tools/call"), ("mcp-name", "get_status")];
    assert_eq!(code(&raw(&app, &headers, body.clone()).await?), (400, Some(-32020)), "MCP-Protocol-Version missing");

    // _meta malformed or missing: -32602, 400; the shape is checked before the fields.
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/list")];
    let list = |params: Value| json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params});
    assert_eq!(code(&raw(&app, &headers, list(json!({}))).await?), (400, Some(-32602)), "no _meta");
    assert_eq!(code(&raw(&app, &headers, list(json!([meta()]))).await?), (400, Some(-32602)), "params an array");
    assert_eq!(
        code(&raw(&app, &headers, list(json!({"_meta": [meta()]}))).await?),
        (400, Some(-32602)),
        "_meta an array"
    );
    let no_capabilities = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}});
    assert_eq!(code(&raw(&app, &headers, list(no_capabilities)).await?), (400, Some(-32602)), "no clientCapabilities");
    let capabilities_array = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": []}});
    assert_eq!(code(&raw(&app, &headers, list(capabilities_array)).await?), (400, Some(-32602)));
    let version_number = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": 2026, "io.modelcontextprotocol/clientCapabilities": {}}});
    assert_eq!(code(&raw(&app, &headers, list(version_number)).await?), (400, Some(-32602)));

    // An unknown version, in _meta or in the header: -32022, 400, with what this server speaks.
    let unknown = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2031-01-01", "io.modelcontextprotocol/clientCapabilities": {}}});
    let refused =
        raw(&app, &[("mcp-protocol-version", "2031-01-01"), ("mcp-method", "tools/list")], list(unknown)).await?;
    assert_eq!(code(&refused), (400, Some(-32022)));
    assert_eq!(refused.body["error"]["data"]["requested"], "2031-01-01");
    assert_eq!(refused.body["error"]["data"]["supported"][0], MODERN);
    let refused =
        raw(&app, &[("mcp-protocol-version", "2099-01-01")], json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}))
            .await?;
    assert_eq!(code(&refused), (400, Some(-32022)));
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let refused = raw(&app, &[("mcp-protocol-version", "2099-01-01")], notification.clone()).await?;
    assert_eq!(code(&refused), (400, Some(-32022)), "a notification naming an unknown version");
    assert_eq!(raw(&app, &[("mcp-protocol-version", MODERN)], notification).await?.status, 202);

    // Methods 2026-07-28 does not have: 404 and -32601.
    assert_eq!(code(&modern(&app, "ping", json!({})).await?), (404, Some(-32601)));
    assert_eq!(code(&modern(&app, "initialize", json!({})).await?), (404, Some(-32601)));

    // An unknown tool, or a registered tool's alias, is not a tool here: -32602.
    for name in ["send_fax", "fixture_alias"] {
        let unknown = modern(&app, "tools/call", json!({"name": name, "arguments": {}})).await?;
        assert_eq!(code(&unknown), (200, Some(-32602)), "{name}");
    }

    // A registry tool needs the elicitation capability: -32021, 400, naming it.
    let needs =
        modern(&app, "tools/call", json!({"name": "fixture_action", "arguments": {"to": "a@example.com"}})).await?;
    assert_eq!(code(&needs), (400, Some(-32021)));
    assert!(needs.body["error"]["data"]["requiredCapabilities"]["elicitation"].is_object());

    // input_required by hand, and a requestState that was tampered with.
    let mut asking = meta();
    asking["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"form": {}}});
    body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                  "params": {"name": "fixture_action", "arguments": {"to": "a@example.com"}, "_meta": asking}});
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tools/call"), ("mcp-name", "fixture_action")];
    let first = raw(&app, &headers, body.clone()).await?;
    assert_eq!(first.body["result"]["resultType"], "input_required", "{:?}", first.body);
    let state = first.body["result"]["requestState"].as_str().context("requestState")?.to_owned();
    let mut tampered = body.clone();
    tampered["params"]["requestState"] = json!(format!("00{state}"));
    tampered["params"]["inputResponses"] = json!({"confirm": accept("confirm")});
    assert_eq!(code(&raw(&app, &headers, tampered).await?), (200, Some(-32602)));
    // A state minted with the callback secret, which every relay holds to verify callbacks, is
    // not one the server issued: it signs with `state_secret`, which no relay has.
    let payload = String::from_utf8(hex::decode(state.split('.').next().unwrap_or_default())?)?;
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    let secret = gatehouse_tests::lifecycle::CALLBACK_SECRET.as_bytes();
    let minted = gatehouse_domain::sealed::seal(secret, "gatehouse mcp requestState", &payload, unix);
    let mut forged = body.clone();
    forged["params"]["requestState"] = json!(minted);
    forged["params"]["inputResponses"] = json!({"confirm": accept("confirm")});
    assert_eq!(code(&raw(&app, &headers, forged).await?), (200, Some(-32602)), "a relay-minted requestState");
    let mut bad_shape = body.clone();
    bad_shape["params"]["requestState"] = json!(state);
    bad_shape["params"]["inputResponses"] = json!([accept("confirm")]);
    assert_eq!(code(&raw(&app, &headers, bad_shape).await?), (200, Some(-32602)), "inputResponses an array");
    // No answer to the question: it is asked again, for the same call.
    let mut unanswered = body.clone();
    unanswered["params"]["requestState"] = json!(state);
    let again = raw(&app, &headers, unanswered).await?;
    assert_eq!(again.body["result"]["resultType"], "input_required");
    let mut cancel = body.clone();
    cancel["params"]["requestState"] = json!(again.body["result"]["requestState"]);
    cancel["params"]["inputResponses"] = json!({"confirm": {"action": "cancel"}});
    let cancelled = raw(&app, &headers, cancel).await?;
    assert_eq!(cancelled.body["result"]["structuredContent"]["status"], "CANCELLED", "{:?}", cancelled.body);

    // Task methods need the extension declared, and check their params' shape and ids.
    let undeclared = modern(&app, "tasks/get", json!({"taskId": id})).await?;
    assert_eq!(code(&undeclared), (400, Some(-32021)));
    assert_eq!(undeclared.body["error"]["data"]["requiredCapabilities"]["extensions"][TASKS], json!({}));
    let mut tasks_meta = meta();
    tasks_meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {TASKS: {}}});
    let task_request = |method: &str, params: Value| {
        let mut params = params;
        params["_meta"] = tasks_meta.clone();
        json!({"jsonrpc": "2.0", "id": 6, "method": method, "params": params})
    };
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get"), ("mcp-name", "tc_000000000000")];
    let unknown = raw(&app, &headers, task_request("tasks/get", json!({"taskId": "tc_000000000000"}))).await?;
    assert_eq!(code(&unknown), (200, Some(-32602)), "an unknown task");
    let no_name = [("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get")];
    assert_eq!(
        code(&raw(&app, &no_name, task_request("tasks/get", json!({"taskId": id}))).await?),
        (400, Some(-32020))
    );
    let array_params = json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": [{"taskId": id}]});
    assert_eq!(code(&raw(&app, &no_name, array_params).await?), (400, Some(-32602)));
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tasks/get"), ("mcp-name", id.as_str())];
    let task = raw(&app, &headers, task_request("tasks/get", json!({"taskId": id}))).await?;
    assert_eq!(task.body["result"]["status"], "input_required", "a PENDING call waits on its confirmation");
    assert_eq!(task.body["result"]["resultType"], "complete");
    let headers = [("mcp-protocol-version", MODERN), ("mcp-method", "tasks/update"), ("mcp-name", id.as_str())];
    let bad_update =
        raw(&app, &headers, task_request("tasks/update", json!({"taskId": id, "inputResponses": [1]}))).await?;
    assert_eq!(code(&bad_update), (200, Some(-32602)), "inputResponses an array");

    // The legacy handshake still works on the same endpoint.
    let init = raw(&app, &[], json!({"jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}})).await?;
    assert_eq!(init.body["result"]["protocolVersion"], "2025-11-25", "{:?}", init.body);
    assert!(init.body["result"].get("resultType").is_none(), "legacy results are as they were");
    let ping =
        raw(&app, &[("mcp-protocol-version", "2025-11-25")], json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
            .await?;
    assert_eq!(ping.body["result"], json!({}));
    Ok(())
}

#[tokio::test]
async fn send_email_and_query_vector_db_are_mcp_tools_and_send_email_confirms_in_the_protocol() -> Result<()> {
    let registry = format!("{GMAIL_REGISTRY},query_vector_db=vector-query");
    let gmail = GmailApp::start(&[("tool_registry", registry.as_str())], &[]).await?;
    let client = discover(&gmail.app, Voice::answering(&[true, true]), vec![ProtocolVersion::V_2026_07_28]).await?;
    let tools = client.list_all_tools().await?;
    let validators = output_validators(&tools)?;
    for name in ["send_email", "query_vector_db"] {
        let tool = tools.iter().find(|t| t.name == name).with_context(|| format!("{name} is not listed"))?;
        let schema = Value::Object((*tool.input_schema).clone());
        assert!(schema["properties"].is_object(), "{name} carries its own parameters' schema: {schema}");
    }
    // The hints are what each tool says of its effects.
    let hints = |name: &str| {
        let hints = tools.iter().find(|t| t.name == name).and_then(|t| t.annotations.clone()).unwrap_or_default();
        (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint)
    };
    assert_eq!(hints("send_email"), (Some(false), Some(false), Some(false), Some(true)));
    assert_eq!(hints("query_vector_db"), (Some(false), Some(true), Some(true), Some(false)));

    // "Email John about tomorrow's meeting." The agent calls send_email; the user is asked to
    // confirm the sentence, says yes, is asked again at the draft, says yes: sent once.
    let session = unique("mcp-email");
    let mut params = CallToolRequestParams::new("send_email").with_arguments(
        json!({"to": "john.smith@gmail.com", "subject": "Meeting Tomorrow", "body": "See you at 10."})
            .as_object()
            .cloned()
            .context("object")?,
    );
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.0.insert("dev.gatehouse/sessionId".to_owned(), json!(session));
    params.meta = Some(meta);
    let sent = client.call_tool(params).await?;
    let sent = checked(&validators, "send_email", &sent)?;
    assert_eq!(sent["status"], "COMPLETED", "{sent}");
    assert_eq!(sent["session_id"], session.as_str(), "the session named in _meta");
    let asked = client.service().asked();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("john.smith@gmail.com") && asked[0].contains("Meeting Tomorrow"), "{asked:?}");
    assert_eq!(gmail.fake.sent().len(), 1, "sent exactly once");
    client.cancel().await?;

    // "No": cancelled when asked to confirm, nothing sent.
    let email = json!({"to": "ann@example.com", "subject": "Lunch", "body": "Noon?"});
    let email = email.as_object().cloned().context("object")?;
    let client = discover(&gmail.app, Voice::answering(&[false]), vec![ProtocolVersion::V_2026_07_28]).await?;
    let declined = client.call_tool(CallToolRequestParams::new("send_email").with_arguments(email.clone())).await?;
    assert_eq!(checked(&validators, "send_email", &declined)?["status"], "CANCELLED");
    assert_eq!(gmail.fake.sent().len(), 1, "nothing more was sent");
    client.cancel().await?;

    // With tasks: confirmed in the protocol, then a task through the draft (the checkpoint)
    // to COMPLETED, the email sent once more.
    let voice = Voice { tasks: true, ..Voice::default() };
    let client = discover(&gmail.app, voice, vec![ProtocolVersion::V_2026_07_28]).await?;
    let params = CallToolRequestParams::new("send_email").with_arguments(email);
    let CallToolResponse::InputRequired(asked) = client.call_tool_once(params.clone()).await? else {
        bail!("send_email must ask to confirm first");
    };
    let mut retry = params;
    retry.input_responses = Some([("confirm".to_owned(), accept("confirm"))].into_iter().collect());
    retry.request_state = asked.request_state;
    let CallToolResponse::Task(task) = client.call_tool_once(retry).await? else {
        bail!("a confirmed send_email answers a task to a client that takes them");
    };
    let id = task.task.task_id;
    let at_draft = poll(&client, &id, |t| t.task.status() == TaskStatus::InputRequired).await?;
    assert!(at_draft.task.task.status_message.is_some(), "the checkpoint's question is the status message");
    let answer = [("proceed".to_owned(), accept("proceed"))].into_iter().collect();
    client.update_task(UpdateTaskParams::new(id.clone(), answer)).await?;
    let done = serde_json::to_value(poll(&client, &id, |t| t.task.status().is_terminal()).await?)?;
    assert_eq!(
        (done["status"].as_str(), done["result"]["structuredContent"]["status"].as_str()),
        (Some("completed"), Some("COMPLETED")),
        "{done}"
    );
    assert_eq!(gmail.fake.sent().len(), 2, "sent once more");
    client.cancel().await?;
    Ok(())
}
