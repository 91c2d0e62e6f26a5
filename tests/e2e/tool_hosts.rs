//! Tools registered by URL (docs/deploying.md, "A tool on its own host"): a team's own tool
//! host, outside this repository and without a database, through the whole lifecycle with its
//! history recorded by the caller; and a tool that cannot be used, which says why in the tools
//! list and in the create's answer.
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{App, Relay, ScratchDatabase, tool_options};
use gatehouse_tests::tool_host::{Flaws, TOOL_NAME, ToolHost};
use gatehouse_tests::{RunnerOptions, app_manifest, free_relay_address, unique};
use reqwest::Method;
use serde_json::{Value, json};

const CONTRACT_SECRET: &str = "tool-hosts-contract-secret";
const SETTLE: Duration = Duration::from_secs(20);

/// The application with `registry` as its tools, allowed to reach any loopback port.
async fn app_with_registry(registry: String) -> Result<App> {
    App::start_on(&app_manifest(), options(registry)).await
}

fn options(registry: String) -> RunnerOptions {
    tool_options(CONTRACT_SECRET, Some(registry))
}

fn ticket(session: &str, relay: &Relay) -> Value {
    json!({
        "session_id": session,
        "function_name": "file_ticket",
        "parameters": {"subject": "The printer is on fire"},
        "callback_url": relay.url,
    })
}

#[tokio::test]
async fn a_teams_own_tool_host_runs_once_and_its_history_is_recorded_for_it() -> Result<()> {
    let host = ToolHost::start(CONTRACT_SECRET, Flaws::default()).await?;
    // A database of its own, so the tool's stats are this test's alone.
    let scratch = ScratchDatabase::create("tool-host").await?;
    let options = scratch.serve(options(format!("{TOOL_NAME}|file_ticket={}", host.url)));
    let app = App::start_on(&app_manifest(), options).await?;
    let relay = Relay::start().await?;

    let listed = app.send(Method::GET, "/voice-tools/tools", None).await?;
    let tools = listed.body["tools"].as_array().context("a list")?;
    ensure!(tools.len() == 1 && tools[0]["available"] == true, "{}", listed.body);
    ensure!(tools[0]["component"] == host.url.as_str() && tools[0]["name"] == TOOL_NAME, "{}", listed.body);

    let created = app.send(Method::POST, "/voice-tools/pending", Some(ticket(&unique("ticket"), &relay))).await?;
    ensure!(created.status == 201, "{}", created.body);
    ensure!(
        created.body["message"] == "I'll open a normal ticket: \"The printer is on fire\". Shall I?",
        "{}",
        created.body
    );
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(checkpoint.body["message"].as_str().is_some_and(|m| m.contains("is drafted")), "{}", checkpoint.body);
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(completion.body["voice_response"] == "I've opened ticket T-1.", "{}", completion.body);
    ensure!(host.opened() == ["T-1"], "one ticket: {:?}", host.opened());

    // The host writes no history; the lifecycle wrote a row for each operation it ran.
    let stats = app.stats_when("file_ticket", SETTLE, |stats| stats["by_operation"]["execute"]["ok"] == 1).await?;
    for operation in ["validate", "prepare", "execute"] {
        let counted = &stats["by_operation"][operation];
        ensure!(counted["executions"] == 1 && counted["ok"] == 1, "{operation}: {stats}");
    }
    ensure!(stats["success_rate"] == 1.0, "every operation succeeded: {stats}");
    let page = app.send(Method::GET, &format!("/voice-tools/tools/{TOOL_NAME}/executions"), None).await?;
    let executions = page.body["executions"].as_array().context("executions")?;
    // The create's validate ran before the call had an id; prepare and execute name it.
    let named =
        |e: &&Value| e["tool_call_id"] == id.as_str() || (e["operation"] == "validate" && e["tool_call_id"].is_null());
    ensure!(executions.len() == 3 && executions.iter().all(|e| e["component"] == host.url.as_str()), "{}", page.body);
    ensure!(executions.iter().filter(named).count() == 3, "{}", page.body);

    // A refusal is recorded as one too.
    let mut bad = ticket(&unique("ticket"), &relay);
    bad["parameters"] = json!({"subject": "", "colour": "red"});
    let refused = app.send(Method::POST, "/voice-tools/pending", Some(bad)).await?;
    ensure!(
        refused.status == 422 && refused.body["fields"].as_array().is_some_and(|f| f.len() == 2),
        "{}",
        refused.body
    );
    app.stats_when(TOOL_NAME, SETTLE, |stats| stats["outcomes"]["rejected"] == 1).await?;
    Ok(())
}

/// Issue 49: a tool host that declares a checkpoint and answers `prepare` without one broke
/// the contract; its call ends FAILED saying so, and `execute` is never sent (it went PENDING →
/// EXECUTING → COMPLETED, the side effect done without the caller's second yes).
#[tokio::test]
async fn a_tool_that_omits_its_checkpoint_never_executes() -> Result<()> {
    let host = ToolHost::start(CONTRACT_SECRET, Flaws { omits_checkpoint: true, ..Flaws::default() }).await?;
    let app = app_with_registry(format!("{TOOL_NAME}|file_ticket={}", host.url)).await?;
    let relay = Relay::start().await?;

    let created = app.send(Method::POST, "/voice-tools/pending", Some(ticket(&unique("skip"), &relay))).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "FAILED", "{}", completion.body);
    let said = completion.body["voice_response"].as_str().unwrap_or_default();
    ensure!(said.contains("stopped before doing anything"), "{}", completion.body);

    let call = app.status(&id).await?.body;
    let history = call["status_history"].to_string();
    ensure!(history.contains("broke its contract") && history.contains("`checkpoint`"), "{call}");
    ensure!(!host.answered().iter().any(|op| op == "execute"), "execute was never sent: {:?}", host.answered());
    ensure!(host.opened().is_empty(), "no ticket was opened: {:?}", host.opened());
    Ok(())
}

#[tokio::test]
async fn a_tool_that_cannot_be_used_says_why_in_the_list_and_the_create() -> Result<()> {
    // A second application with no contract_secret: its tool routes answer 401 to everyone,
    // as a tool host whose secret differs from the caller's would.
    let unsigned_host = App::start_on(&app_manifest(), RunnerOptions::default()).await?;
    let closed = free_relay_address()?;
    let registry = [
        "far_away=https://tools.elsewhere.example/internal/tools/gmail".to_owned(),
        format!("switched_off=http://{closed}/internal/tools/gmail"),
        format!("wrong_secret={}/internal/tools/gmail", unsigned_host.runner.base_url),
    ];
    let app = app_with_registry(registry.join(",")).await?;
    let relay = Relay::start().await?;

    let listed = app.send(Method::GET, "/voice-tools/tools", None).await?;
    ensure!(listed.status == 200, "{}", listed.body);
    let cause = |name: &str| -> Result<Value> {
        let tools = listed.body["tools"].as_array().context("a list")?;
        let tool = tools.iter().find(|t| t["name"] == name).context("listed")?;
        ensure!(tool["available"] == false, "{tool}");
        Ok(tool["cause"].clone())
    };
    let far = cause("far_away")?;
    ensure!(far["kind"] == "not_allowed", "{far}");
    ensure!(far["explanation"].as_str().is_some_and(|e| e.contains("https://tools.elsewhere.example")), "{far}");
    ensure!(cause("switched_off")?["kind"] == "no_connection", "{}", listed.body);
    ensure!(cause("wrong_secret")?["kind"] == "signature_refused", "{}", listed.body);

    for (tool, kind) in
        [("far_away", "not_allowed"), ("switched_off", "no_connection"), ("wrong_secret", "signature_refused")]
    {
        let mut body = ticket(&unique("fault"), &relay);
        body["function_name"] = json!(tool);
        let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
        ensure!(created.status == 502 && created.body["code"] == "tool_unavailable", "{tool}: {}", created.body);
        ensure!(created.body["cause"]["kind"] == kind, "{tool}: {}", created.body);
        ensure!(!created.body.to_string().contains(CONTRACT_SECRET), "no secret in the answer: {}", created.body);
    }
    Ok(())
}
