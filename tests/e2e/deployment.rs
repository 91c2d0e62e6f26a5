//! Deploying beyond one host: the routes that expose the tool contract and the executor
//! hand-off to other hosts answer only requests signed with `contract_secret`, and requests
//! inside one application keep working, signed or not.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_domain::service_auth;
use gatehouse_tests::cluster::TOOL_COMPONENTS;
use gatehouse_tests::gmail::{GmailApp, gmail_variables, start_fake};
use gatehouse_tests::lifecycle::{App, Relay};
use gatehouse_tests::{
    Runner, RunnerOptions, app_manifest, database_url, fixture_manifest, http, select_components, sign_contract,
    start_expecting_failure, unique, unix_now,
};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);
const SECRET: &str = "contract-secret-for-tests";

/// The signature a host would put on this request, with a fresh nonce.
/// A request to one of the routes other hosts use, signed with `signature` if given.
async fn service_request(
    app: &App,
    method: Method,
    path: &str,
    body: &[u8],
    signature: Option<String>,
) -> Result<(u16, Value)> {
    service_request_to(&app.runner, method, path, body, signature).await
}

/// A call waiting at its checkpoint, with its draft made: what a forged `execute` would send.
pub(crate) async fn call_at_checkpoint(app: &App, relay: &Relay) -> Result<String> {
    let body = json!({"session_id": unique("deploy"), "function_name": "send_email", "callback_url": relay.url,
        "parameters": {"to": "john.smith@gmail.com", "subject": "Meeting Tomorrow", "body": "At 10."}});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create answered {}: {}", created.status, created.body);
    let id = created.body["tool_call_id"].as_str().context("no tool_call_id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    Ok(id)
}

#[tokio::test]
async fn with_no_contract_secret_the_exposed_routes_answer_nobody() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let relay = Relay::start().await?;
    let id = call_at_checkpoint(&app, &relay).await?;
    let request = serde_json::to_vec(&json!({"tool_call_id": id, "attempt": 1, "parameters": {}}))?;
    for (method, path) in [
        (Method::GET, "/internal/tools/gmail/tool/describe"),
        (Method::POST, "/internal/tools/gmail/tool/execute"),
        (Method::POST, "/internal/tools/vector-query/tool/validate"),
        (Method::POST, "/internal/executor/drive"),
    ] {
        // Even a request signed with some key: with no secret set there is nothing to check it by.
        let signature = sign_contract(SECRET.as_bytes(), unix_now(), method.as_str(), path, &request);
        for signature in [None, Some(signature)] {
            let (status, body) = service_request(&app, method.clone(), path, &request, signature).await?;
            ensure!(status == 401 && body["code"] == "unauthorized", "{method} {path}: {status} {body}");
        }
    }
    ensure!(fake.sent().is_empty(), "nothing was sent");
    ensure!(fake.drafts().len() == 1, "the draft is still there");
    Ok(())
}

#[tokio::test]
async fn with_a_contract_secret_only_a_fresh_signature_of_that_very_request_is_answered() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[("contract_secret", SECRET)], &[]).await?;
    let relay = Relay::start().await?;
    // Inside one application the contract is still reached by chaining, now signed: the seed
    // conversation runs as before.
    let id = call_at_checkpoint(&app, &relay).await?;
    let execute = "/internal/tools/gmail/tool/execute";
    let request = serde_json::to_vec(&json!({"tool_call_id": id, "attempt": 1, "parameters": {}}))?;
    // Each refusal says which part failed (docs/architecture.md, "Signed hops").
    let forged = [
        ("unsigned", None, "signature_missing"),
        (
            "another key",
            Some(sign_contract(b"not-the-secret", unix_now(), "POST", execute, &request)),
            "signature_mismatch",
        ),
        (
            "another operation",
            Some(sign_contract(SECRET.as_bytes(), unix_now(), "POST", "/internal/tools/gmail/tool/prepare", &request)),
            "signature_mismatch",
        ),
        (
            "another body",
            Some(sign_contract(SECRET.as_bytes(), unix_now(), "POST", execute, b"{}")),
            "signature_mismatch",
        ),
        (
            "stale",
            Some(sign_contract(SECRET.as_bytes(), unix_now() - 3600, "POST", execute, &request)),
            "signature_stale",
        ),
    ];
    for (what, signature, code) in forged {
        let (status, body) = service_request(&app, Method::POST, execute, &request, signature).await?;
        ensure!(status == 401 && body["code"] == code, "{what}: {status} {body}");
    }
    ensure!(fake.sent().is_empty(), "no forged request sent the email");
    ensure!(fake.drafts().len() == 1, "the draft is untouched");

    let describe = "/internal/tools/gmail/tool/describe";
    let signature = sign_contract(SECRET.as_bytes(), unix_now(), "GET", describe, b"");
    let (status, body) = service_request(&app, Method::GET, describe, b"", Some(signature.clone())).await?;
    ensure!(status == 200 && body["name"] == "send_email", "a signed describe: {status} {body}");
    // A signed describe is single-use too: every nonce is accepted once.
    let (status, body) = service_request(&app, Method::GET, describe, b"", Some(signature)).await?;
    ensure!(status == 401 && body["code"] == "signature_replayed", "a replayed describe: {status} {body}");

    ensure!(app.resume(&id, "proceed").await?.status == 202);
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    ensure!(fake.sent().len() == 1, "the relay's proceed sent exactly one email");
    Ok(())
}

/// Spin 4.0.x's PostgreSQL host never answers a query with zero rows, so the runner the tests
/// use fails such a query, naming it; without the guard the same query answers no rows.
#[tokio::test]
async fn the_test_runner_refuses_a_query_that_returns_no_rows() -> Result<()> {
    let sql = "SELECT 1 FROM pg_class WHERE false";
    // The probe's manifest requires one variable.
    let variables = vec![("must_have".to_owned(), "set".to_owned())];
    let guarded = Runner::start(&fixture_manifest(), options(variables.clone(), Vec::new()))?;
    let answer: Value = http().get(guarded.url("/pg/error")).query(&[("sql", sql)]).send().await?.json().await?;
    let error = answer["error"].to_string();
    ensure!(error.contains("zero-row result") && error.contains(sql), "the guard names the statement: {answer}");
    let one_row: Value =
        http().get(guarded.url("/pg/error")).query(&[("sql", "SELECT 1")]).send().await?.json().await?;
    ensure!(one_row["unexpected_success"]["rows"] == 1, "a query with a row still answers: {one_row}");

    let without_guard = RunnerOptions {
        variables,
        env: vec![("GATEHOUSE_REFUSE_ZERO_ROW_QUERIES".into(), "false".into())],
        ..Default::default()
    };
    let unguarded = Runner::start(&fixture_manifest(), without_guard)?;
    let answer: Value = http().get(unguarded.url("/pg/error")).query(&[("sql", sql)]).send().await?.json().await?;
    ensure!(answer["unexpected_success"]["rows"] == 0, "without the guard it is an empty result: {answer}");
    Ok(())
}

fn options(variables: Vec<(String, String)>, extra_args: Vec<String>) -> RunnerOptions {
    RunnerOptions { variables, extra_args, ..Default::default() }
}

/// The lifecycle on one host, Gmail and vector search on another, one database: the registry
/// names the tools by URL, every contract request between the hosts is signed, and the seed
/// conversation runs as on one host.
#[tokio::test]
async fn the_lifecycle_and_its_tools_on_two_hosts() -> Result<()> {
    let fake = start_fake().await?;
    let mut tool_variables = gmail_variables(&fake);
    tool_variables.push(("contract_secret".into(), SECRET.into()));
    let tools = Runner::start(&app_manifest(), options(tool_variables, select_components(&TOOL_COMPONENTS)))?;
    let origin = tools.base_url.clone();

    let registry = format!(
        "send_email|send_gmail={origin}/internal/tools/gmail,query_vector_db={origin}/internal/tools/vector-query"
    );
    let edge_variables =
        [("tool_registry", registry.as_str()), ("tools_origin", origin.as_str()), ("contract_secret", SECRET)];
    let edge_variables = edge_variables.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    let edge = Runner::start(
        &app_manifest(),
        options(edge_variables, select_components(&gatehouse_tests::LIFECYCLE_COMPONENTS)),
    )?;
    let app = App { runner: edge, http: reqwest::Client::new(), database_url: database_url() };

    // The edge host serves no tool and the tools host no lifecycle route.
    let listed = app.send(Method::GET, "/voice-tools/tools", None).await?;
    ensure!(listed.status == 200, "{}", listed.body);
    ensure!(listed.body.to_string().contains(&format!("{origin}/internal/tools/gmail")), "{}", listed.body);
    let (status, _) = service_request_to(&tools, Method::POST, "/voice-tools/pending", b"{}", None).await?;
    ensure!(status == 404, "the tools host has no lifecycle routes: {status}");

    // The seed conversation, validated, prepared and sent by the tools host.
    let relay = Relay::start().await?;
    let id = call_at_checkpoint(&app, &relay).await?;
    ensure!(fake.drafts().len() == 1 && fake.sent().is_empty(), "one draft at the checkpoint, nothing sent");
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    relay.wait_for(&id, "completion", SETTLE).await?;
    let callbacks = relay.for_call(&id);
    ensure!(callbacks.len() >= 2 && callbacks.iter().all(|c| c.signature_valid), "every callback is signed");
    let sent = fake.sent();
    ensure!(sent.len() == 1, "exactly one email: {}", sent.len());
    ensure!(call["result"]["message_id"] == sent[0].id.as_str(), "{call}");

    // An unsigned or wrongly signed contract request to the tools host moves nothing.
    let other = relay_call(&app, &relay).await?;
    let prepare = "/internal/tools/gmail/tool/prepare";
    let request = serde_json::to_vec(&json!({"tool_call_id": other, "attempt": 1, "session_id": "s",
        "function_name": "send_email", "parameters": {"to": "a@example.com", "subject": "x", "body": "y"}}))?;
    let wrong = sign_contract(b"not-the-secret", unix_now(), "POST", prepare, &request);
    for (signature, code) in [(None, "signature_missing"), (Some(wrong), "signature_mismatch")] {
        let (status, body) = service_request_to(&tools, Method::POST, prepare, &request, signature).await?;
        ensure!(status == 401 && body["code"] == code, "{status} {body}");
    }
    ensure!(fake.drafts().is_empty() && fake.sent().len() == 1, "nothing drafted or sent by the forged requests");
    Ok(())
}

/// A PENDING call on `app`, for a forged request to aim at.
async fn relay_call(app: &App, relay: &Relay) -> Result<String> {
    let body = json!({"session_id": unique("deploy"), "function_name": "send_email", "callback_url": relay.url,
        "parameters": {"to": "ann@example.com", "subject": "Hello", "body": "Hi."}});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create answered {}: {}", created.status, created.body);
    created.body["tool_call_id"].as_str().map(str::to_owned).context("no tool_call_id")
}

async fn service_request_to(
    runner: &Runner,
    method: Method,
    path: &str,
    body: &[u8],
    signature: Option<String>,
) -> Result<(u16, Value)> {
    let mut request = http().request(method, runner.url(path)).header("content-type", "application/json");
    if let Some(signature) = signature {
        request = request.header(service_auth::SIGNATURE_HEADER, signature);
    }
    let response = request.body(body.to_vec()).send().await?;
    let status = response.status().as_u16();
    Ok((status, response.json::<Value>().await.unwrap_or(Value::Null)))
}

/// A host that would serve a component reaching, by service chaining, one it does not serve
/// refuses to start, and says which.
#[test]
fn a_selection_missing_a_chained_target_is_refused_at_start_up() -> Result<()> {
    let (status, output) =
        start_expecting_failure(&app_manifest(), options(Vec::new(), select_components(&["confirm"])))?;
    ensure!(!status.success(), "it must not start");
    ensure!(
        output.contains("'confirm'") && output.contains("'async-executor'") && output.contains("{{ executor_origin }}"),
        "the message names the component, the missing target and the entry: {output}"
    );
    let (status, output) = start_expecting_failure(&app_manifest(), options(Vec::new(), select_components(&["nope"])))?;
    ensure!(!status.success() && output.contains("nope"), "{output}");
    Ok(())
}
