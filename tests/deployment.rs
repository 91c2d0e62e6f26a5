//! Deploying beyond one host: the routes that expose the tool contract and the executor
//! hand-off to other hosts answer only requests signed with `contract_secret`, and requests
//! inside one application keep working, signed or not.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, ensure};
use gatehouse_domain::service_auth;
use gatehouse_tests::gmail::GmailApp;
use gatehouse_tests::lifecycle::{App, Relay};
use gatehouse_tests::unique;
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);
const SECRET: &str = "contract-secret-for-tests";

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

/// A request to one of the routes other hosts use, signed with `signature` if given.
async fn service_request(
    app: &App,
    method: Method,
    path: &str,
    body: &[u8],
    signature: Option<String>,
) -> Result<(u16, Value)> {
    let mut request =
        reqwest::Client::new().request(method, app.runner.url(path)).header("content-type", "application/json");
    if let Some(signature) = signature {
        request = request.header(service_auth::SIGNATURE_HEADER, signature);
    }
    let response = request.body(body.to_vec()).send().await?;
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    Ok((status, body))
}

/// A call waiting at its checkpoint, with its draft made: what a forged `execute` would send.
async fn call_at_checkpoint(app: &App, relay: &Relay) -> Result<String> {
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
        let signature = service_auth::sign(SECRET.as_bytes(), now(), method.as_str(), path, &request);
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
    let forged = [
        ("unsigned", None),
        ("another key", Some(service_auth::sign(b"not-the-secret", now(), "POST", execute, &request))),
        (
            "another operation",
            Some(service_auth::sign(SECRET.as_bytes(), now(), "POST", "/internal/tools/gmail/tool/prepare", &request)),
        ),
        ("another body", Some(service_auth::sign(SECRET.as_bytes(), now(), "POST", execute, b"{}"))),
        ("stale", Some(service_auth::sign(SECRET.as_bytes(), now() - 3600, "POST", execute, &request))),
    ];
    for (what, signature) in forged {
        let (status, body) = service_request(&app, Method::POST, execute, &request, signature).await?;
        ensure!(status == 401 && body["code"] == "unauthorized", "{what}: {status} {body}");
    }
    ensure!(fake.sent().is_empty(), "no forged request sent the email");
    ensure!(fake.drafts().len() == 1, "the draft is untouched");

    let describe = "/internal/tools/gmail/tool/describe";
    let signature = service_auth::sign(SECRET.as_bytes(), now(), "GET", describe, b"");
    let (status, body) = service_request(&app, Method::GET, describe, b"", Some(signature)).await?;
    ensure!(status == 200 && body["name"] == "send_email", "a signed describe: {status} {body}");

    ensure!(app.resume(&id, "proceed").await?.status == 202);
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    ensure!(fake.sent().len() == 1, "the relay's proceed sent exactly one email");
    Ok(())
}
