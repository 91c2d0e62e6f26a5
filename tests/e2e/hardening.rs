//! What an attacker holding a token, or a network position, or a buggy client tried against
//! the product, each on the real runner, components and database: a replayed execute, a
//! confirm that redirects another relay's reports, a call amplified by its corrections, a
//! session flooded with calls, the callback route used as a port scanner, a relay answering
//! with a flood, a browser page from another origin, values PostgreSQL cannot hold, a relay that
//! never answers or takes its time over a backlog.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_domain::service_auth;
use gatehouse_tests::cluster::TOOL_COMPONENTS;
use gatehouse_tests::gmail::{GmailApp, gmail_variables, start_fake};
use gatehouse_tests::http_server::Reply;
use gatehouse_tests::lifecycle::{App, Relay, lifecycle_options};
use gatehouse_tests::proxy::{self, RecordingProxy};
use gatehouse_tests::{Runner, RunnerOptions, app_manifest, database_url, select_components, unique};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);
const SECRET: &str = "contract-secret-for-the-replay-test";

/// The lifecycle on one host, Gmail on another, and between them a proxy that records every
/// contract request, as someone on the network between the hosts would. One seed conversation
/// runs through it; then its captured `prepare` and `execute` are sent again: as they were
/// (a replay, refused: each signature is good once) and signed afresh with the same body (a
/// duplicate, answered from what the call recorded). Gmail sends one email in all.
#[tokio::test]
async fn a_captured_prepare_or_execute_sent_again_does_nothing() -> Result<()> {
    let fake = start_fake().await?;
    let mut tool_variables = gmail_variables(&fake);
    tool_variables.push(("contract_secret".into(), SECRET.into()));
    let options = RunnerOptions {
        variables: tool_variables,
        extra_args: select_components(&TOOL_COMPONENTS),
        ..Default::default()
    };
    let tools = Runner::start(&app_manifest(), options)?;
    let wire = RecordingProxy::start(&tools.base_url).await?;
    let origin = wire.origin.clone();
    let registry = format!(
        "send_email|send_gmail={origin}/internal/tools/gmail,query_vector_db={origin}/internal/tools/vector-query"
    );
    let edge_variables =
        [("tool_registry", registry.as_str()), ("tools_origin", origin.as_str()), ("contract_secret", SECRET)];
    let variables = edge_variables.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    let extra_args = select_components(&gatehouse_tests::LIFECYCLE_COMPONENTS);
    let options = RunnerOptions { variables, extra_args, ..Default::default() };
    let app = App {
        runner: Runner::start(&app_manifest(), options)?,
        http: reqwest::Client::new(),
        database_url: database_url(),
    };

    let relay = Relay::start().await?;
    let body = json!({"session_id": unique("replay"), "function_name": "send_email", "callback_url": relay.url,
        "parameters": {"to": "john.smith@gmail.com", "subject": "Meeting Tomorrow", "body": "At 10."}});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    ensure!(fake.sent().len() == 1, "one email");

    let captured = wire.captured();
    for operation in ["prepare", "execute"] {
        let path = format!("/internal/tools/gmail/tool/{operation}");
        let original =
            captured.iter().find(|c| c.path == path).with_context(|| format!("no {operation} on the wire"))?;
        for _ in 0..2 {
            let (status, answer) = proxy::send(&tools.base_url, original).await?;
            let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
            ensure!(status == 401 && answer["code"] == "signature_replayed", "replayed {operation}: {status} {answer}");
        }
        // The same body, signed afresh: as a duplicate from a confused host would come.
        let signature = gatehouse_tests::sign_contract(
            SECRET.as_bytes(),
            gatehouse_tests::unix_now(),
            "POST",
            &path,
            &original.body,
        );
        let duplicate = reqwest::Client::new()
            .post(tools.url(&path))
            .header("content-type", "application/json")
            .header(service_auth::SIGNATURE_HEADER, signature)
            .body(original.body.clone())
            .send()
            .await?;
        ensure!(duplicate.status() == 200, "a duplicate {operation} answers what was recorded");
        let answer: Value = duplicate.json().await?;
        match operation {
            "prepare" => ensure!(answer["checkpoint"] == call["checkpoint"], "{answer}"),
            _ => ensure!(answer["result"]["message_id"] == call["result"]["message_id"], "{answer} vs {call}"),
        }
    }
    ensure!(fake.sent().len() == 1, "still one email: {}", fake.sent().len());
    ensure!(fake.drafts().is_empty(), "no draft made again");
    Ok(())
}

/// A confirm cannot send another relay's reports elsewhere: a call created with a callback URL
/// keeps it; one created without may be given one, and the status history says so.
#[tokio::test]
async fn a_confirm_cannot_redirect_a_calls_reports() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let owner = Relay::start().await?;
    let thief = Relay::start().await?;
    let id = app.create_id(&unique("hijack"), json!({"to": "a@example.com"}), Some(&owner.url)).await?;
    let hijack =
        app.send(Method::POST, &format!("/voice-tools/confirm/{id}"), Some(json!({"callback_url": thief.url}))).await?;
    ensure!(
        hijack.status == 409 && hijack.body["code"] == "callback_url_conflict",
        "{} {}",
        hijack.status,
        hijack.body
    );
    ensure!(app.status(&id).await?.body["status"] == "PENDING", "the refused confirm changed nothing");
    let confirm = format!("/voice-tools/confirm/{id}");
    let same = app.send(Method::POST, &confirm, Some(json!({"callback_url": owner.url}))).await?;
    ensure!(same.status == 202, "{}", same.body);
    owner.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(thief.for_call(&id).is_empty(), "nothing reached the other relay");

    let unowned = app.create_id(&unique("hijack"), json!({"to": "b@example.com"}), None).await?;
    let given = app
        .send(Method::POST, &format!("/voice-tools/confirm/{unowned}"), Some(json!({"callback_url": owner.url})))
        .await?;
    ensure!(given.status == 202, "{}", given.body);
    let status = app.status(&unowned).await?.body;
    ensure!(status["callback_url"] == owner.url.as_str(), "{status}");
    let noted = status["status_history"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|e| e["reason"] == "callback_url given at confirm");
    ensure!(noted, "the status history records where the reports now go: {status}");
    Ok(())
}

/// A reason, a label or parameters past their bound are refused before anything is written,
/// and a call's corrections cannot grow its history without end: the status stays small and
/// the calls list carries summaries only, whatever five such calls went through.
#[tokio::test]
async fn corrections_cannot_amplify_a_call() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let session = unique("amplify");
    let long_reason = "r".repeat(501);
    let id = app.create_id(&session, json!({"to": "a@example.com"}), None).await?;
    let path = format!("/voice-tools/modify/{id}");
    let refused = app
        .send(Method::PATCH, &path, Some(json!({"parameters": {"to": "b@example.com"}, "reason": long_reason})))
        .await?;
    ensure!(refused.status == 400 && refused.body["fields"][0]["field"] == "reason", "{}", refused.body);
    let cancel = format!("/voice-tools/cancel/{id}");
    ensure!(app.send(Method::DELETE, &cancel, Some(json!({"reason": long_reason}))).await?.status == 400);
    let huge = json!({"session_id": session, "function_name": "fixture_action",
        "parameters": {"to": "a@example.com", "subject": "x".repeat(50 * 1024)}});
    let too_big = app.send(Method::POST, "/voice-tools/pending", Some(huge)).await?;
    ensure!(too_big.status == 400 && too_big.body["fields"][0]["field"] == "parameters", "{}", too_big.body);
    let label = json!({"session_id": session, "function_name": "fixture_action", "intent_id": "i".repeat(201),
        "parameters": {"to": "a@example.com"}});
    ensure!(app.send(Method::POST, "/voice-tools/pending", Some(label)).await?.status == 400);

    // Five calls, each corrected with the largest reason and subjects, until they stop.
    let mut ids = Vec::new();
    for _ in 0..5 {
        let id = app.create_id(&session, json!({"to": "a@example.com"}), None).await?;
        let reason = "r".repeat(500);
        let mut accepted = 0;
        for round in 0..60 {
            let subject = format!("{round}{}", "s".repeat(20 * 1024));
            let body = json!({"parameters": {"subject": subject}, "reason": reason});
            let answer = app.send(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(body)).await?;
            if answer.status != 200 {
                ensure!(answer.status == 409 && answer.body["code"] == "invalid_state", "{}", answer.body);
                break;
            }
            accepted += 1;
        }
        ensure!(accepted < 50, "the history bound stops corrections this large before the count does: {accepted}");
        ids.push(id);
    }
    for id in &ids {
        let status = app
            .http
            .get(app.runner.url(&format!("/voice-tools/status/{id}")))
            .bearer_auth(gatehouse_tests::TOKEN)
            .send()
            .await?;
        ensure!(status.status() == 200);
        let bytes = status.bytes().await?.len();
        ensure!(bytes < 400 * 1024, "a status answer is bounded: {bytes} bytes");
    }
    let page = app.send(Method::GET, &format!("/voice-tools/calls?session_id={session}&limit=100"), None).await?;
    ensure!(page.status == 200, "{}", page.body);
    let calls = page.body["calls"].as_array().context("a page")?;
    ensure!(calls.len() >= 5);
    for call in calls {
        ensure!(call.get("parameters_history").is_none() && call.get("status_history").is_none(), "{call}");
        ensure!(call["status_since"].is_string() && call["corrections"].is_number(), "{call}");
    }
    Ok(())
}

/// One session may hold only so many waiting calls; settling one makes room again.
#[tokio::test]
async fn a_session_cannot_flood_the_store_with_waiting_calls() -> Result<()> {
    let app = App::start(lifecycle_options(&[("max_pending_calls_per_session", "3")], &[])).await?;
    let session = unique("flood");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(app.create_id(&session, json!({"to": "a@example.com"}), None).await?);
    }
    let full = app.create(&session, json!({"to": "a@example.com"}), None).await?;
    ensure!(full.status == 429 && full.body["code"] == "too_many_open_calls", "{} {}", full.status, full.body);
    ensure!(
        app.create(&unique("other"), json!({"to": "a@example.com"}), None).await?.status == 201,
        "other sessions are not affected"
    );
    ensure!(app.cancel(&ids[0]).await?.status == 200);
    ensure!(
        app.create(&session, json!({"to": "a@example.com"}), None).await?.status == 201,
        "a settled call makes room"
    );
    Ok(())
}

/// With nothing configured, no callback may go to a loopback port; the callbacks route says
/// only "unreachable" for a relay that did not answer, never why; a relay admitted only by a
/// wildcard is not reached at a private address, even when its name resolves there; and one the
/// manifest's outbound rule does not cover is refused, saying so.
#[tokio::test]
async fn the_callbacks_cannot_scan_the_hosts_network() -> Result<()> {
    let defaults =
        App::start(lifecycle_options(&[("callback_allowed_hosts", ""), ("callback_host", "callbacks.invalid")], &[]))
            .await?;
    for port in [22, 5432, 41500] {
        let url = format!("http://127.0.0.1:{port}/cb");
        let answer = defaults.create(&unique("scan"), json!({"to": "a@example.com"}), Some(&url)).await?;
        ensure!(answer.status == 422 && answer.body["code"] == "callback_not_allowed", "{url}: {}", answer.body);
    }

    let app = App::start(lifecycle_options(&[], &[])).await?;
    let closed = gatehouse_tests::unreachable_callback_url()?;
    let id = app.create_id(&unique("scan"), json!({"to": "a@example.com"}), Some(&closed)).await?;
    ensure!(app.cancel(&id).await?.status == 200);
    let attempts = app.callback_attempts(&id, 4, SETTLE).await?;
    for attempt in attempts["callbacks"].as_array().into_iter().flatten() {
        ensure!(attempt["error"] == "unreachable" && attempt["status_code"].is_null(), "{attempt}");
    }

    // `localhost` is admitted by a wildcard only: it resolves to the loopback, which a wildcard
    // never reaches. Named exactly, the same relay is reached.
    let relay = Relay::start().await?;
    let port = relay.url.split(':').nth(2).and_then(|p| p.split('/').next()).context("a port")?.to_owned();
    let by_name = relay.url.replace("127.0.0.1", "localhost");
    let wildcard = App::start(lifecycle_options(
        &[("callback_allowed_hosts", &format!("localhost:{port}")), ("callback_host", &format!("*:{port}"))],
        &[],
    ))
    .await?;
    let id = wildcard.create_id(&unique("rebind"), json!({"to": "a@example.com"}), Some(&by_name)).await?;
    ensure!(wildcard.cancel(&id).await?.status == 200);
    let attempts = wildcard.callback_attempts(&id, 4, SETTLE).await?;
    ensure!(attempts["callbacks"].as_array().into_iter().flatten().all(|a| a["error"] == "unreachable"), "{attempts}");
    ensure!(relay.for_call(&id).is_empty(), "the wildcard did not reach the loopback");
    let exact = App::start(lifecycle_options(
        &[("callback_allowed_hosts", &format!("localhost:{port}")), ("callback_host", &format!("localhost:{port}"))],
        &[],
    ))
    .await?;
    let id = exact.create_id(&unique("named"), json!({"to": "a@example.com"}), Some(&by_name)).await?;
    ensure!(exact.cancel(&id).await?.status == 200);
    relay.wait_for(&id, "completion", SETTLE).await?;

    // Admitted by the allowlist but not by the manifest's outbound rule: the attempt says
    // which setting refused it, and nothing reaches the relay.
    let refused = App::start(lifecycle_options(
        &[("callback_allowed_hosts", &format!("localhost:{port}")), ("callback_host", "elsewhere.invalid")],
        &[],
    ))
    .await?;
    let id = refused.create_id(&unique("refused"), json!({"to": "a@example.com"}), Some(&by_name)).await?;
    ensure!(refused.cancel(&id).await?.status == 200);
    let attempts = refused.callback_attempts(&id, 1, SETTLE).await?;
    let first = &attempts["callbacks"][0];
    ensure!(
        first["error"].as_str().is_some_and(|e| e.contains("allowed_outbound_hosts")) && first["status_code"].is_null(),
        "{attempts}"
    );
    ensure!(relay.for_call(&id).is_empty(), "the manifest let the callback out");
    Ok(())
}

/// A relay that answers a callback with megabytes is read only up to a bound: the call is
/// unaffected, and the attempt says why it did not count.
#[tokio::test]
async fn a_relay_answering_with_a_flood_cannot_exhaust_a_component() -> Result<()> {
    let flood = gatehouse_tests::raw::FloodingRelay::start(8 * 1024 * 1024).await?;
    let GmailApp { app, fake } = GmailApp::start(&[], &[]).await?;
    let body = json!({"session_id": unique("flood"), "function_name": "send_email", "callback_url": flood.url,
        "parameters": {"to": "ann@example.com", "subject": "Hi", "body": "Hello."}});
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    app.wait_for(&id, "PREPARED", SETTLE).await?;
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    ensure!(fake.sent().len() == 1);
    let attempts = app.callback_attempts(&id, 1, SETTLE).await?;
    let flooded = attempts["callbacks"].as_array().into_iter().flatten();
    ensure!(flooded.clone().any(|a| a["error"].as_str().is_some_and(|e| e.contains("longer than"))), "{attempts}");
    Ok(())
}

/// The MCP endpoint admits a browser only from an origin its configuration lists, scheme
/// included, whatever `Host` the request claims (a DNS-rebinding page controls both).
#[tokio::test]
async fn mcp_admits_only_configured_browser_origins() -> Result<()> {
    let app = App::start(lifecycle_options(&[("mcp_allowed_origins", "https://console.example.com")], &[])).await?;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let host = app.runner.base_url.trim_start_matches("http://").to_owned();
    let post = |origin: &'static str, host: String| {
        app.http
            .post(app.runner.url("/mcp"))
            .bearer_auth(gatehouse_tests::TOKEN)
            .header("accept", "application/json, text/event-stream")
            .header("origin", origin)
            .header("host", host)
            .json(&ping)
            .send()
    };
    ensure!(post("http://evil.example", "evil.example".into()).await?.status() == 403, "a rebinding page");
    ensure!(post("http://console.example.com", host.clone()).await?.status() == 403, "the scheme counts");
    ensure!(post("https://console.example.com", host).await?.status() != 403, "the configured origin");
    Ok(())
}

/// A value PostgreSQL cannot hold, a cursor or a timestamp out of its range, an idempotency key
/// that is not text: each is a 400 with a stable code, never a 500, and nothing is written.
#[tokio::test]
async fn values_postgresql_cannot_hold_are_refused_up_front() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let session = unique("nul");
    let id = app.create_id(&session, json!({"to": "a@example.com"}), None).await?;
    let bodies = [
        (
            Method::POST,
            "/voice-tools/pending".to_owned(),
            json!({"session_id": session, "function_name": "fixture_action", "intent_id": "a\u{0}b", "parameters": {"to": "a@example.com"}}),
        ),
        (
            Method::POST,
            "/voice-tools/pending".to_owned(),
            json!({"session_id": session, "function_name": "fixture_action", "connection_id": "\u{0}", "parameters": {"to": "a@example.com"}}),
        ),
        (
            Method::PATCH,
            format!("/voice-tools/modify/{id}"),
            json!({"parameters": {"subject": "x"}, "reason": "no\u{0}"}),
        ),
        (Method::DELETE, format!("/voice-tools/cancel/{id}"), json!({"reason": "\u{0}"})),
        (
            Method::POST,
            "/query-vector-db".to_owned(),
            json!({"session_id": session, "callback_url": "http://127.0.0.1:41000/cb", "user_query": "q\u{0}"}),
        ),
    ];
    for (method, path, body) in bodies {
        let answer = app.send(method.clone(), &path, Some(body)).await?;
        ensure!(
            answer.status == 400 && answer.body["code"] == "invalid_input",
            "{method} {path}: {} {}",
            answer.status,
            answer.body
        );
    }
    for query in [
        "/voice-tools/calls?cursor=9223372036854775807_tc_0123456789ab",
        "/voice-tools/calls?session_id=a%00b",
        "/voice-tools/tools/fixture_action/executions?cursor=-5_3",
        "/voice-tools/tools/fixture_action/executions?since=0000-01-01T00:00:00Z",
    ] {
        let answer = app.send(Method::GET, query, None).await?;
        ensure!(
            answer.status == 400 && answer.body["code"] == "invalid_input",
            "{query}: {} {}",
            answer.status,
            answer.body
        );
    }
    let fraction =
        format!("/voice-tools/tools/fixture_action/executions?since=2026-01-01T00:00:00.{}Z", "1".repeat(300));
    ensure!(app.send(Method::GET, &fraction, None).await?.status == 400);
    ensure!(app.status(&id).await?.body["status"] == "PENDING", "nothing moved the call");

    // An Idempotency-Key that is not UTF-8 is refused, not ignored: two such creates would
    // otherwise make two calls.
    let key = reqwest::header::HeaderValue::from_bytes(b"key-\xff\xfe").context("an opaque header value")?;
    for _ in 0..2 {
        let answer = app
            .http
            .post(app.runner.url("/voice-tools/pending"))
            .bearer_auth(gatehouse_tests::TOKEN)
            .header("idempotency-key", key.clone())
            .json(&json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "k@example.com"}}))
            .send()
            .await?;
        ensure!(answer.status() == 400, "{}", answer.status());
    }
    let db = app.db().await?;
    let made: i64 = db.query_one("SELECT count(*) FROM tool_calls WHERE session_id = $1", &[&session]).await?.get(0);
    ensure!(made == 1, "only the first call exists: {made}");
    Ok(())
}

/// Connections that never finish their request's head are closed after the header timeout
/// while the runner goes on serving others; a body that never arrives gets 408; a connection
/// is closed after its last allowed request.
#[tokio::test]
async fn slow_clients_are_cut_off_and_the_others_served() -> Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = ["--header-read-timeout", "1", "--body-read-timeout", "1", "--max-requests-per-connection", "2"];
    let app = App::start(lifecycle_options(&[], &limits)).await?;
    let address = app.runner.base_url.trim_start_matches("http://").to_owned();
    let mut slow = Vec::new();
    for _ in 0..20 {
        let mut stream = tokio::net::TcpStream::connect(&address).await?;
        stream.write_all(b"GET /health HTTP/1.1\r\nHost: gatehouse\r\n").await?;
        slow.push(stream);
    }
    for _ in 0..5 {
        ensure!(app.send(Method::GET, "/health", None).await?.status == 200, "others are served meanwhile");
    }
    for mut stream in slow {
        let mut buffer = [0u8; 512];
        // Closed: the read ends (0 bytes, or a reset), well within ten timeouts.
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer)).await;
        let read = read.context("a connection with an unfinished head was still open after 10 s")?;
        ensure!(read.map_or(true, |n| n == 0 || String::from_utf8_lossy(&buffer[..n]).starts_with("HTTP/1.1 408")));
    }

    let mut stream = tokio::net::TcpStream::connect(&address).await?;
    let head = format!(
        "POST /voice-tools/pending HTTP/1.1\r\nHost: gatehouse\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        gatehouse_tests::TOKEN
    );
    stream.write_all(head.as_bytes()).await?;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    ensure!(answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"), "{answer}");

    let mut stream = tokio::net::TcpStream::connect(&address).await?;
    let request = b"GET /health HTTP/1.1\r\nHost: gatehouse\r\n\r\n";
    stream.write_all(request).await?;
    stream.write_all(request).await?;
    let mut answers = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answers)).await??;
    let answers = String::from_utf8_lossy(&answers).to_ascii_lowercase();
    ensure!(answers.matches("http/1.1 200").count() == 2, "{answers}");
    ensure!(answers.contains("connection: close"), "the second answer closes the connection: {answers}");
    Ok(())
}

/// The dev token everyone knows is for this machine only: without a token, the runner refuses
/// to listen anywhere but on the loopback.
#[tokio::test]
async fn the_dev_token_never_leaves_the_loopback() -> Result<()> {
    let output = tokio::process::Command::new(gatehouse_tests::gatehouse_bin())
        .args(["up", "--listen", "0.0.0.0:0", "--manifest"])
        .arg(app_manifest())
        .env("DATABASE_URL", database_url())
        .env("GATEHOUSE_STATE_DIR", gatehouse_tests::shared_state_dir())
        .env_remove("SPIN_VARIABLE_API_TOKEN")
        .stdin(std::process::Stdio::null())
        .output()
        .await?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(!output.status.success(), "it must not start: {stderr}");
    ensure!(stderr.contains("no api_token is set") && stderr.contains("0.0.0.0"), "{stderr}");
    Ok(())
}

/// A tool host that does not answer the `discard` after a cancel at the checkpoint leaves the
/// discard owed: the sweeper tries it again after a lease until the tool answers.
#[tokio::test]
async fn a_discard_that_failed_is_tried_again() -> Result<()> {
    let scratch = gatehouse_tests::lifecycle::ScratchDatabase::create("discard_retry").await?;
    let options = lifecycle_options(&[("execution_lease_seconds", "1")], &["--sweep-interval", "0.2"]);
    let app = App::start(scratch.serve(options)).await?;
    let relay = Relay::start().await?;
    let id =
        app.create_id(&unique("discard"), json!({"to": "d@example.com", "discard_traps": 2}), Some(&relay.url)).await?;
    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(app.cancel(&id).await?.status == 200);
    let db = app.db().await?;
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let row = db
            .query_one(
                "SELECT (SELECT count(*) FROM fixture_tool_log WHERE tool_call_id = $1 AND operation = 'discard'),
                        (SELECT discard_owed_since IS NULL FROM tool_calls WHERE tool_call_id = $1)",
                &[&id],
            )
            .await?;
        let (discards, settled): (i64, bool) = (row.get(0), row.get(1));
        if discards == 3 && settled {
            break;
        }
        ensure!(std::time::Instant::now() < deadline, "{discards} discards, settled {settled}, after {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    ensure!(app.status(&id).await?.body["status"] == "CANCELLED");
    Ok(())
}

/// Expiry reports to a relay that never answers do not hold up another relay's: a sweep
/// delivers to each relay apart.
#[tokio::test]
async fn a_relay_that_never_answers_does_not_delay_the_others() -> Result<()> {
    let scratch = gatehouse_tests::lifecycle::ScratchDatabase::create("slow_relay").await?;
    let options = lifecycle_options(&[("pending_ttl_seconds", "1")], &["--sweep-interval", "0"]);
    let app = App::start(scratch.serve(options)).await?;
    let silent = gatehouse_tests::raw::SilentRelay::start().await?;
    let relay = Relay::start().await?;
    let session = unique("slow");
    for _ in 0..10 {
        app.create_id(&session, json!({"to": "s@example.com"}), Some(&silent.url)).await?;
    }
    let quick = app.create_id(&unique("quick"), json!({"to": "q@example.com"}), Some(&relay.url)).await?;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let swept = app.sweep().await?;
    ensure!(swept.status == 200 && swept.body["expired"] == 11, "{}", swept.body);
    // One after another, the silent relay's ten reports would take minutes (four attempts of
    // five seconds each); side by side, the other relay has its report at once.
    let report = relay.wait_for(&quick, "completion", Duration::from_secs(15)).await?;
    ensure!(report.body["status"] == "EXPIRED", "{}", report.body);
    Ok(())
}

/// A backlog's reports go to their relay side by side, within a bound: forty expiry reports to
/// a relay that takes 300 ms over each are delivered several at a time (one after another they
/// would take twelve seconds of the pass), and never more than sixteen at once. A relay that
/// hangs eight seconds over every callback holds up only its own: the other relay's forty are
/// all delivered before the first of the hung relay's ends (one relay after the other, they
/// would wait for sixteen seconds of it).
#[tokio::test]
async fn a_backlogs_reports_go_to_their_relay_side_by_side_within_a_bound() -> Result<()> {
    let scratch = gatehouse_tests::lifecycle::ScratchDatabase::create("backlog_relay").await?;
    let variables = [("pending_ttl_seconds", "1"), ("callback_timeout_seconds", "20")];
    let options = lifecycle_options(&variables, &["--sweep-interval", "0"]);
    let app = App::start(scratch.serve(options)).await?;
    let relay = SlowRelay::start(Duration::from_millis(300)).await?;
    let hung = SlowRelay::start(Duration::from_secs(8)).await?;
    let (session, hung_session) = (unique("backlog"), unique("backlog-hung"));
    for _ in 0..40 {
        app.create_id(&session, json!({"to": "b@example.com"}), Some(&relay.url)).await?;
    }
    for _ in 0..20 {
        app.create_id(&hung_session, json!({"to": "h@example.com"}), Some(&hung.url)).await?;
    }
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let swept = app.sweep().await?;
    ensure!(swept.status == 200 && swept.body["expired"] == 60, "{}", swept.body);
    let deadline = std::time::Instant::now() + SETTLE;
    while relay.answered() < 40 {
        ensure!(std::time::Instant::now() < deadline, "{} of 40 reports delivered", relay.answered());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ensure!(hung.answered() == 0, "the hung relay answered before the other relay's reports were all delivered");
    ensure!(hung.most_at_once() >= 1, "the hung relay's reports were not sent beside the other relay's");
    let most = relay.most_at_once();
    ensure!((2..=16).contains(&most), "{most} reports were in flight at once");
    Ok(())
}

/// A relay that takes its time over each callback and counts how many it holds at once.
struct SlowRelay {
    url: String,
    counts: Arc<SlowRelayCounts>,
}

#[derive(Default)]
struct SlowRelayCounts {
    in_flight: AtomicUsize,
    most: AtomicUsize,
    answered: AtomicUsize,
}

impl SlowRelay {
    async fn start(delay: Duration) -> Result<SlowRelay> {
        let counts = Arc::new(SlowRelayCounts::default());
        let shared = counts.clone();
        let base = gatehouse_tests::http_server::serve(gatehouse_tests::relay_listener().await?, move |_| {
            let counts = shared.clone();
            async move {
                let now = counts.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                counts.most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                counts.in_flight.fetch_sub(1, Ordering::SeqCst);
                counts.answered.fetch_add(1, Ordering::SeqCst);
                Reply::json(200, json!({}))
            }
        })?;
        Ok(SlowRelay { url: format!("{base}/callbacks"), counts })
    }

    fn answered(&self) -> usize {
        self.counts.answered.load(Ordering::SeqCst)
    }

    fn most_at_once(&self) -> usize {
        self.counts.most.load(Ordering::SeqCst)
    }
}
