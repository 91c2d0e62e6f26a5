//! "Strict at every door": only a well-formed instruction moves a call. Each test here is one
//! hole an outside tester found, driven over real HTTP (by hand, over a TCP socket, where a
//! client library would tidy the request up), with what must not have happened checked in the
//! database and in the fake Gmail afterwards.

use std::time::Duration;

use anyhow::{Context, Result, bail, ensure};
use gatehouse_domain::callback;
use gatehouse_tests::gmail::GmailApp;
use gatehouse_tests::lifecycle::{App, CALLBACK_SECRET, Relay, lifecycle_options};
use gatehouse_tests::raw::{self, LengthOnlyReceiver, RawRequest, RawResponse};
use gatehouse_tests::{TOKEN, app_manifest, unique};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(30);

/// Bodies that are JSON but not an object: what serde would otherwise map onto a request's
/// fields (an array by position, the others onto nothing).
const NOT_OBJECTS: [&str; 7] = ["[]", "\"x\"", "1", "true", "null", "[{}]", "\n  [ ]  "];

/// The fixture-tool application, without a background sweeper (nothing moves unless a test
/// asks).
async fn fixture_app() -> Result<App> {
    App::start(lifecycle_options(&[], &["--sweep-interval", "0"])).await
}

async fn send(app: &App, request: RawRequest) -> Result<RawResponse> {
    raw::send(&app.runner.base_url, &request).await
}

fn authed(method: &str, target: &str) -> RawRequest {
    RawRequest::new(method, target).bearer(TOKEN)
}

/// The answer's JSON body, failing with the request and the answer if it is not JSON.
fn body_of(request: &RawRequest, answer: &RawResponse) -> Result<Value> {
    answer.json().with_context(|| {
        format!("{} answered {} with a body that is not JSON: {:?}", request.describe(), answer.status, answer.text())
    })
}

/// Sends `request` and checks it is refused with `status` and `code`; returns the body.
async fn expect_refusal(app: &App, request: RawRequest, status: u16, code: &str) -> Result<Value> {
    let answer = send(app, request.clone()).await?;
    let body = answer.json().unwrap_or(Value::Null);
    ensure!(
        answer.status == status && body["code"] == code,
        "{} answered {} {}, expected {status} {code}",
        request.describe(),
        answer.status,
        answer.text()
    );
    ensure!(
        answer.is_json_content_type(),
        "{}: the refusal is not application/json: {:?}",
        request.describe(),
        answer.headers
    );
    ensure!(body["error"].is_string(), "{}: no error sentence: {body}", request.describe());
    Ok(body)
}

/// A refusal of a body that is not a JSON object: 400 `invalid_input`, saying so.
async fn expect_not_an_object(app: &App, request: RawRequest) -> Result<()> {
    let described = request.describe();
    let body = expect_refusal(app, request, 400, "invalid_input").await?;
    let error = body["error"].as_str().unwrap_or_default();
    ensure!(error.contains("must be a JSON object"), "{described}: the refusal does not say why: {body}");
    Ok(())
}

/// The whole row of a call, as text, to compare before and after.
async fn row(app: &App, id: &str) -> Result<String> {
    let db = app.db().await?;
    let row = db.query_one("SELECT t::text FROM tool_calls t WHERE tool_call_id = $1", &[&id]).await?;
    Ok(row.get(0))
}

async fn calls_in_session(app: &App, session: &str) -> Result<i64> {
    let db = app.db().await?;
    Ok(db.query_one("SELECT count(*) FROM tool_calls WHERE session_id = $1", &[&session]).await?.get(0))
}

fn email() -> Value {
    json!({"to": "john@gmail.com", "subject": "Meeting Tomorrow", "body": "Let's discuss the Q3 numbers at 10."})
}

async fn create_email(app: &App, session: &str, callback_url: Option<&str>) -> Result<String> {
    let mut body = json!({"session_id": session, "function_name": "send_email", "parameters": email()});
    if let Some(url) = callback_url {
        body["callback_url"] = json!(url);
    }
    let created = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(created.status == 201, "create answered {}: {}", created.status, created.body);
    created.body["tool_call_id"].as_str().map(str::to_owned).context("no tool_call_id")
}

/// `[]` on confirm, `["proceed"]` on resume, `[]` on cancel, a positional array on create,
/// modify and the two direct flows, and every other JSON value that is not an object: each is
/// refused with 400 before any field is read, and no call moves, no call is recorded, no draft
/// is made and no email is sent.
#[tokio::test]
async fn a_body_that_is_not_a_json_object_moves_nothing() -> Result<()> {
    let GmailApp { app, fake } = GmailApp::start(&[("gate_timeout_seconds", "2")], &["--sweep-interval", "0"]).await?;
    let relay = Relay::start().await?;
    let session = unique("strict-body");
    let pending = create_email(&app, &session, Some(&relay.url)).await?;
    let prepared = create_email(&app, &session, Some(&relay.url)).await?;
    ensure!(app.confirm(&prepared).await?.status == 202);
    app.wait_for(&prepared, "PREPARED", SETTLE).await?;
    relay.wait_for(&prepared, "checkpoint", SETTLE).await?;
    let drafts: Vec<String> = fake.drafts().into_iter().map(|d| d.id).collect();
    ensure!(drafts.len() == 1, "the checkpoint made one draft: {drafts:?}");
    let (pending_row, prepared_row) = (row(&app, &pending).await?, row(&app, &prepared).await?);
    let kinds = |relay: &Relay| -> Vec<String> { relay.received().into_iter().map(|r| r.kind).collect() };
    let callbacks = kinds(&relay);

    let with = |extra: &[String]| -> Vec<String> {
        NOT_OBJECTS.iter().map(|b| (*b).to_owned()).chain(extra.iter().cloned()).collect()
    };
    let on_existing_calls = [
        ("POST", format!("/voice-tools/confirm/{pending}"), with(&[json!(["http://127.0.0.1:9/cb"]).to_string()])),
        ("DELETE", format!("/voice-tools/cancel/{pending}"), with(&[json!(["changed my mind"]).to_string()])),
        ("DELETE", format!("/voice-tools/cancel/{prepared}"), with(&[json!(["changed my mind"]).to_string()])),
        (
            "PATCH",
            format!("/voice-tools/modify/{pending}"),
            with(&[
                json!([{"subject": "x"}]).to_string(),
                json!([{"to": "eve@example.com"}, "the caller said so"]).to_string(),
            ]),
        ),
        (
            "POST",
            format!("/resume-execution/{prepared}"),
            with(&[
                json!(["proceed"]).to_string(),
                json!(["cancel"]).to_string(),
                json!(["proceed", "go"]).to_string(),
                "\r\n [\"proceed\"]".to_owned(),
            ]),
        ),
    ];
    for (method, target, bodies) in &on_existing_calls {
        for body in bodies {
            expect_not_an_object(&app, authed(method, target).json_bytes(body.as_bytes())).await?;
            ensure!(row(&app, &pending).await? == pending_row, "{method} {target} {body} changed {pending}");
            ensure!(row(&app, &prepared).await? == prepared_row, "{method} {target} {body} changed {prepared}");
        }
    }

    // Creating routes: positional arrays that name a session of their own, so that a call they
    // recorded would show.
    let (created, direct_email, direct_search) =
        (unique("strict-create"), unique("strict-gmail"), unique("strict-search"));
    let creating = [
        (
            "/voice-tools/pending",
            &created,
            with(&[json!([created, "send_email", null, email(), null, null, relay.url]).to_string()]),
        ),
        (
            "/execute-gmail",
            &direct_email,
            with(&[
                json!([direct_email, null, null, relay.url, "john@gmail.com", null, null, "Hi", "Body"]).to_string()
            ]),
        ),
        (
            "/query-vector-db",
            &direct_search,
            with(&[json!([direct_search, null, null, relay.url, "late shipments in the northwest"]).to_string()]),
        ),
    ];
    for (target, session, bodies) in &creating {
        for body in bodies {
            expect_not_an_object(&app, authed("POST", target).json_bytes(body.as_bytes())).await?;
            ensure!(calls_in_session(&app, session).await? == 0, "POST {target} {body} recorded a call");
        }
    }

    ensure!(row(&app, &pending).await? == pending_row, "{pending} moved");
    ensure!(row(&app, &prepared).await? == prepared_row, "{prepared} moved");
    ensure!(fake.sent().is_empty(), "an email was sent: {:?}", fake.sent());
    let drafts_after: Vec<String> = fake.drafts().into_iter().map(|d| d.id).collect();
    ensure!(drafts_after == drafts, "the drafts changed: {drafts:?} → {drafts_after:?}");
    let callbacks_after = kinds(&relay);
    ensure!(callbacks_after == callbacks, "callbacks were sent: {callbacks:?} → {callbacks_after:?}");

    // The same requests with an object body do what they say (so the refusals above were
    // about the shape, not about how the test sends them).
    let modified = send(
        &app,
        authed("PATCH", &format!("/voice-tools/modify/{pending}"))
            .json_bytes(json!({"parameters": {"subject": "Moved to Friday"}}).to_string()),
    )
    .await?;
    ensure!(modified.status == 200, "modify with an object answered {}: {}", modified.status, modified.text());
    let cancelled = send(&app, authed("DELETE", &format!("/voice-tools/cancel/{prepared}")).json_bytes("{}")).await?;
    ensure!(cancelled.status == 200, "cancel with {{}} answered {}: {}", cancelled.status, cancelled.text());
    app.wait_for(&prepared, "CANCELLED", SETTLE).await?;
    Ok(())
}

/// Routes that take no body (the reads, the sweep, health) take an empty body or `{}` and
/// nothing else: an instruction sent to the wrong route is refused, not ignored.
#[tokio::test]
async fn routes_without_a_body_take_nothing_or_an_empty_object() -> Result<()> {
    let app = fixture_app().await?;
    let session = unique("strict-nobody");
    let id = app.create_id(&session, json!({"to": "ann@example.com"}), None).await?;
    let db = app.db().await?;
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value, expires_at)
         VALUES ($1, 'notes', '{\"n\": 1}'::jsonb, now() + interval '1 hour')",
        &[&session],
    )
    .await?;
    let before = row(&app, &id).await?;
    let routes = [
        ("GET", format!("/voice-tools/status/{id}"), true),
        ("GET", format!("/voice-tools/context/{session}"), true),
        ("GET", format!("/get-session-context?session_id={session}&context_key=notes"), true),
        ("GET", "/voice-tools/tools".to_owned(), true),
        ("GET", "/voice-tools/tools/fixture_action/executions".to_owned(), true),
        ("GET", "/voice-tools/tools/fixture_action/stats".to_owned(), true),
        ("GET", format!("/voice-tools/calls?session_id={session}"), true),
        ("GET", format!("/voice-tools/calls/{id}/callbacks"), true),
        ("POST", "/voice-tools/sweep".to_owned(), true),
        ("GET", "/health".to_owned(), false),
    ];
    let instructions = [json!({"action": "proceed"}).to_string(), json!({"reason": "stop"}).to_string()];
    for (method, target, needs_token) in &routes {
        let request = |body: &str| {
            let request = if *needs_token { authed(method, target) } else { RawRequest::new(method, target) };
            if body.is_empty() { request } else { request.json_bytes(body.as_bytes()) }
        };
        for accepted in ["", "{}", " { } "] {
            let answer = send(&app, request(accepted)).await?;
            ensure!(
                answer.status == 200,
                "{method} {target} with body {accepted:?} answered {}: {}",
                answer.status,
                answer.text()
            );
        }
        for refused in NOT_OBJECTS.iter().map(|b| (*b).to_owned()).chain(instructions.iter().cloned()) {
            expect_refusal(&app, request(&refused), 400, "invalid_input").await?;
        }
    }
    ensure!(row(&app, &id).await? == before, "{id} moved");
    Ok(())
}

async fn mcp(app: &App, body: &str) -> Result<(RawResponse, Value)> {
    let request =
        authed("POST", "/mcp").header("Accept", "application/json, text/event-stream").json_bytes(body.as_bytes());
    let answer = send(app, request.clone()).await?;
    let parsed = body_of(&request, &answer)?;
    Ok((answer, parsed))
}

/// On `POST /mcp` a message that is not one JSON object is an invalid request (HTTP 400 with a
/// JSON-RPC error and a null id), and a `tools/call` whose `params` or `arguments` is not an
/// object is invalid params: neither runs anything.
#[tokio::test]
async fn mcp_refuses_messages_params_and_arguments_that_are_not_objects() -> Result<()> {
    let app = fixture_app().await?;
    let id = app.create_id(&unique("strict-mcp"), json!({"to": "ann@example.com"}), None).await?;
    let before = row(&app, &id).await?;
    let confirm = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "confirm_tool", "arguments": {"tool_call_id": id}}});
    let messages: Vec<String> = NOT_OBJECTS
        .iter()
        .map(|b| (*b).to_owned())
        .chain([json!([confirm]).to_string(), json!([confirm, confirm]).to_string()])
        .collect();
    for message in &messages {
        let (answer, body) = mcp(&app, message).await?;
        ensure!(answer.status == 400, "/mcp {message} answered {}: {body}", answer.status);
        ensure!(
            body["jsonrpc"] == "2.0" && body["id"].is_null() && body["error"]["code"] == -32600,
            "/mcp {message}: not an invalid-request error: {body}"
        );
        ensure!(body["error"]["message"].is_string(), "/mcp {message}: {body}");
        ensure!(row(&app, &id).await? == before, "/mcp {message} moved {id}");
    }

    let bad_arguments = [json!([id]), json!(id), json!(1), json!(true), json!([{"tool_call_id": id}])];
    let mut calls: Vec<Value> = bad_arguments
        .into_iter()
        .enumerate()
        .map(|(n, arguments)| {
            json!({"jsonrpc": "2.0", "id": 10 + n, "method": "tools/call",
                "params": {"name": "confirm_tool", "arguments": arguments}})
        })
        .collect();
    for (n, params) in
        [json!(["confirm_tool", {"tool_call_id": id}]), json!("confirm_tool"), json!(7)].into_iter().enumerate()
    {
        calls.push(json!({"jsonrpc": "2.0", "id": 20 + n, "method": "tools/call", "params": params}));
    }
    for call in &calls {
        let (answer, body) = mcp(&app, &call.to_string()).await?;
        ensure!(answer.status < 500, "/mcp {call} answered {}: {body}", answer.status);
        ensure!(
            body["jsonrpc"] == "2.0" && body["id"] == call["id"] && body["error"]["code"] == -32602,
            "/mcp {call}: not an invalid-params error: {body}"
        );
        ensure!(body.get("result").is_none(), "/mcp {call}: an error and a result: {body}");
        ensure!(row(&app, &id).await? == before, "/mcp {call} moved {id}");
    }

    // The same endpoint, with objects, reads the call: the refusals were about the shapes.
    let status = json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
        "params": {"name": "get_status", "arguments": {"tool_call_id": id}}});
    let (answer, body) = mcp(&app, &status.to_string()).await?;
    ensure!(answer.status == 200, "get_status answered {}: {body}", answer.status);
    ensure!(body["result"]["structuredContent"]["status"] == "PENDING", "{body}");
    Ok(())
}

/// Path parameters are percent-decoded as UTF-8, with `+` a literal plus: a session, a tool
/// name and a call id are found however they are escaped. A malformed escape is a 400, a
/// decoded call id that is no id a 404: never a silent answer about the literal text.
#[tokio::test]
async fn percent_encoded_path_parameters_are_decoded_and_malformed_escapes_refused() -> Result<()> {
    let GmailApp { app, fake: _fake } = GmailApp::start(&[], &["--sweep-interval", "0"]).await?;
    let suffix = unique("pct");
    let sessions = [
        (format!("call 42-{suffix}"), vec![format!("call%2042-{suffix}")]),
        (format!("café-7-{suffix}"), vec![format!("caf%C3%A9-7-{suffix}"), format!("caf%c3%a9-7-{suffix}")]),
        (format!("a/b-{suffix}"), vec![format!("a%2Fb-{suffix}"), format!("a%2fb-{suffix}")]),
        (format!("x?y-{suffix}"), vec![format!("x%3Fy-{suffix}")]),
        (format!("plus+sign-{suffix}"), vec![format!("plus+sign-{suffix}"), format!("plus%2Bsign-{suffix}")]),
    ];
    let mut ids = Vec::new();
    for (session, encodings) in &sessions {
        let id = create_email(&app, session, None).await?;
        for encoded in encodings {
            let request = authed("GET", &format!("/voice-tools/context/{encoded}"));
            let answer = send(&app, request.clone()).await?;
            let body = body_of(&request, &answer)?;
            ensure!(answer.status == 200, "context of {encoded:?} answered {}: {body}", answer.status);
            let listed: Vec<&str> =
                body["pending"].as_array().into_iter().flatten().filter_map(|c| c["tool_call_id"].as_str()).collect();
            ensure!(
                body["session_id"] == session.as_str() && listed == [id.as_str()],
                "/voice-tools/context/{encoded} must be the session {session:?} with {id}: {body}"
            );
        }
        ids.push(id);
    }
    // In a path a `+` is a plus, not a space.
    let plus = format!("call+42-{suffix}");
    let request = authed("GET", &format!("/voice-tools/context/{plus}"));
    let answer = send(&app, request.clone()).await?;
    let body = body_of(&request, &answer)?;
    ensure!(answer.status == 200 && body["session_id"] == plus.as_str() && body["pending"] == json!([]), "{body}");

    // Call ids: escaped characters of a real id find it, on reads and on actions.
    let id = &ids[0];
    let hex = id.strip_prefix("tc_").context("an id starts with tc_")?;
    for encoded in [format!("tc%5F{hex}"), format!("%74%63%5f{hex}")] {
        let request = authed("GET", &format!("/voice-tools/status/{encoded}"));
        let answer = send(&app, request.clone()).await?;
        let body = body_of(&request, &answer)?;
        ensure!(answer.status == 200 && body["tool_call_id"] == id.as_str(), "status/{encoded}: {body}");
    }
    let cancel_target = &ids[3];
    let cancel_hex = cancel_target.strip_prefix("tc_").context("tc_")?;
    let request = authed("DELETE", &format!("/voice-tools/cancel/tc%5F{cancel_hex}"));
    let answer = send(&app, request.clone()).await?;
    let body = body_of(&request, &answer)?;
    ensure!(answer.status == 200 && body["status"] == "CANCELLED", "cancel/tc%5F{cancel_hex}: {body}");
    ensure!(app.status(cancel_target).await?.body["status"] == "CANCELLED");

    // Tool names, by name and by alias.
    for (encoded, route) in [("send%5Femail", "stats"), ("send%5Femail", "executions"), ("send%5fgmail", "stats")] {
        let request = authed("GET", &format!("/voice-tools/tools/{encoded}/{route}"));
        let answer = send(&app, request.clone()).await?;
        let body = body_of(&request, &answer)?;
        ensure!(answer.status == 200, "/voice-tools/tools/{encoded}/{route} answered {}: {body}", answer.status);
        if route == "stats" {
            ensure!(body["tool"] == "send_email", "{encoded}: {body}");
        }
    }

    // Malformed escapes: a 400 on every route with a path parameter, and nothing moves.
    let pending = &ids[1];
    let pending_hex = pending.strip_prefix("tc_").context("tc_")?;
    let before = row(&app, pending).await?;
    let malformed = ["%zz", "call%2042%4", "%ff", "caf%C3-7", "abc%", "%%41", "%C3%28"];
    for bad in malformed {
        for target in [
            format!("/voice-tools/context/{bad}"),
            format!("/voice-tools/tools/{bad}/stats"),
            format!("/voice-tools/tools/{bad}/executions"),
            format!("/voice-tools/status/{bad}"),
        ] {
            expect_refusal(&app, authed("GET", &target), 400, "invalid_input").await?;
        }
    }
    for bad_id in [format!("tc%5F{pending_hex}%4"), format!("tc_{pending_hex}%zz"), format!("%ff{pending_hex}")] {
        expect_refusal(&app, authed("GET", &format!("/voice-tools/status/{bad_id}")), 400, "invalid_input").await?;
        expect_refusal(&app, authed("POST", &format!("/voice-tools/confirm/{bad_id}")), 400, "invalid_input").await?;
        expect_refusal(&app, authed("DELETE", &format!("/voice-tools/cancel/{bad_id}")), 400, "invalid_input").await?;
        let patch = authed("PATCH", &format!("/voice-tools/modify/{bad_id}"))
            .json_bytes(json!({"parameters": {"subject": "x"}}).to_string());
        expect_refusal(&app, patch, 400, "invalid_input").await?;
        let resume =
            authed("POST", &format!("/resume-execution/{bad_id}")).json_bytes(json!({"action": "proceed"}).to_string());
        expect_refusal(&app, resume, 400, "invalid_input").await?;
    }
    // Well-formed escapes of text that is no call id: not found.
    for not_an_id in [format!("tc%5F{pending_hex}0"), "call%2042".to_owned(), "tc%5Fnot%20an%20id".to_owned()] {
        expect_refusal(&app, authed("GET", &format!("/voice-tools/status/{not_an_id}")), 404, "not_found").await?;
        expect_refusal(&app, authed("POST", &format!("/voice-tools/confirm/{not_an_id}")), 404, "not_found").await?;
    }
    ensure!(row(&app, pending).await? == before, "a refused request moved {pending}");
    Ok(())
}

/// A path no route serves answers in the API's JSON error shape, with any method, with or
/// without a token: never the host's plain-text page. Under `spin up` that takes a component
/// on the lowest-priority route, `/...`, in spin.toml (the runner alone would answer JSON, Spin
/// would not); the test manifest extends spin.toml and so has it too.
#[tokio::test]
async fn paths_no_route_serves_answer_json() -> Result<()> {
    let manifest = app_manifest();
    let text = std::fs::read_to_string(&manifest)?;
    let parsed: toml::Value = toml::from_str(&text)?;
    let triggers = parsed["trigger"]["http"].as_array().context("no [[trigger.http]]")?;
    let fallback = triggers
        .iter()
        .find(|t| t.get("route").and_then(toml::Value::as_str) == Some("/..."))
        .and_then(|t| t.get("component").and_then(toml::Value::as_str))
        .with_context(|| format!("{} has no route \"/...\"", manifest.display()))?;
    let source = parsed.get("component").and_then(|c| c.get(fallback)).and_then(|c| c.get("source"));
    ensure!(source.is_some(), "{}: the \"/...\" route's component {fallback} has no source", manifest.display());

    let app = fixture_app().await?;
    let paths = [
        ("GET", "/nope"),
        ("GET", "/voice-tools/nope"),
        ("GET", "/voice-tools/status/"),
        ("GET", "/voice-tools/tools/x/y/z"),
        ("GET", "/"),
        ("GET", "/voice-tools"),
        ("POST", "/nope"),
        ("DELETE", "/voice-tools/nope"),
        ("PATCH", "/voice-tools/modify/"),
        ("POST", "/resume-execution"),
        ("GET", "/mcp/extra"),
    ];
    for (method, path) in paths {
        for with_token in [true, false] {
            let request = if with_token { authed(method, path) } else { RawRequest::new(method, path) };
            let answer = send(&app, request.clone()).await?;
            let body = body_of(&request, &answer)?;
            ensure!(
                answer.is_json_content_type(),
                "{}: answered {} without application/json: {:?}",
                request.describe(),
                answer.status,
                answer.headers
            );
            ensure!(body["error"].is_string() && body["code"].is_string(), "{}: {body}", request.describe());
            match answer.status {
                404 => ensure!(body["code"] == "not_found", "{}: {body}", request.describe()),
                405 => ensure!(answer.header("allow").is_some(), "{}: a 405 without Allow", request.describe()),
                401 if !with_token => ensure!(body["code"] == "unauthorized", "{}: {body}", request.describe()),
                other => bail!("{} answered {other}: {body}", request.describe()),
            }
        }
    }
    // Known routes with a trailing slash or doubled slashes: whatever they answer, never a 5xx
    // and always JSON.
    let session = unique("strict-slash");
    for target in [
        format!("/get-session-context/?session_id={session}&context_key=k"),
        "/get-session-context/".to_owned(),
        "//get-session-context".to_owned(),
        format!("/voice-tools/context/{session}/"),
        "/voice-tools/tools/".to_owned(),
        "/voice-tools/tools/fixture_action/stats/".to_owned(),
        "/voice-tools/status/tc_000000000000/".to_owned(),
        "/health/".to_owned(),
    ] {
        let request = authed("GET", &target);
        let answer = send(&app, request.clone()).await?;
        let body = body_of(&request, &answer)?;
        ensure!(answer.status < 500, "{} answered {}: {body}", request.describe(), answer.status);
        ensure!(answer.status < 400 || body["code"].is_string(), "{}: {body}", request.describe());
    }

    // A trailing slash reaches the same component as the route, which decides on the route it
    // matched, not on the path: no token, no sweep; the stored-context route stays itself.
    for (method, path) in [("POST", "/voice-tools/sweep/"), ("GET", "/get-session-context/?session_id=s&context_key=k")]
    {
        let request = RawRequest::new(method, path);
        let answer = send(&app, request.clone()).await?;
        let body = body_of(&request, &answer)?;
        ensure!(answer.status == 401 && body["code"] == "unauthorized", "{}: {body}", request.describe());
    }
    let request = authed("GET", &format!("/get-session-context/?session_id={session}&context_key=k"));
    let answer = send(&app, request.clone()).await?;
    let body = body_of(&request, &answer)?;
    ensure!(answer.status == 404 && body["error"] == "Not found or expired", "{}: {body}", request.describe());

    // A known path with a method it does not have: a 405 in the same shape, naming the method.
    let request = authed("PUT", "/voice-tools/pending").json_bytes("{}");
    let answer = send(&app, request.clone()).await?;
    let body = body_of(&request, &answer)?;
    ensure!(answer.status == 405 && body["code"].is_string() && answer.header("allow") == Some("POST"), "{body}");
    Ok(())
}

/// Two `Authorization` headers are refused with 401, whichever comes first and even when both
/// are right: a credential that is ambiguous is not guessed at.
#[tokio::test]
async fn two_authorization_headers_are_refused_in_either_order() -> Result<()> {
    let app = fixture_app().await?;
    let session = unique("strict-auth");
    let id = app.create_id(&session, json!({"to": "ann@example.com"}), None).await?;
    let before = row(&app, &id).await?;
    let (right, wrong) = (format!("Bearer {TOKEN}"), "Bearer not-the-token".to_owned());
    let pairs = [
        (("Authorization", wrong.clone()), ("Authorization", right.clone())),
        (("Authorization", right.clone()), ("Authorization", wrong.clone())),
        (("Authorization", right.clone()), ("Authorization", right.clone())),
        (("authorization", wrong.clone()), ("AUTHORIZATION", right.clone())),
        (("Authorization", right.clone()), ("authorization", format!("bearer {TOKEN}"))),
    ];
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let requests = || {
        [
            RawRequest::new("GET", &format!("/voice-tools/context/{session}")),
            RawRequest::new("GET", &format!("/voice-tools/status/{id}")),
            RawRequest::new("POST", &format!("/voice-tools/confirm/{id}")),
            RawRequest::new("DELETE", &format!("/voice-tools/cancel/{id}")),
            RawRequest::new("POST", "/mcp")
                .header("Accept", "application/json, text/event-stream")
                .json_bytes(ping.as_bytes()),
        ]
    };
    for ((first_name, first), (second_name, second)) in &pairs {
        for request in requests() {
            let request = request.header(first_name, first).header(second_name, second);
            expect_refusal(&app, request, 401, "unauthorized").await?;
            ensure!(row(&app, &id).await? == before, "a request with two credentials moved {id}");
        }
    }
    // One right credential is let in, one wrong one is not: the client above speaks HTTP.
    let one = send(&app, authed("GET", &format!("/voice-tools/status/{id}"))).await?;
    ensure!(one.status == 200, "one right credential answered {}: {}", one.status, one.text());
    let wrong_only = RawRequest::new("GET", &format!("/voice-tools/status/{id}")).header("Authorization", &wrong);
    expect_refusal(&app, wrong_only, 401, "unauthorized").await?;
    ensure!(app.status(&id).await?.body["status"] == "PENDING");
    Ok(())
}

/// Callbacks declare their length and are not chunked, so a receiver that reads only
/// `Content-Length` (Python's `http.server`, some serverless front doors) gets the whole
/// signed body: checkpoint and completion of a call run to the end, and the completion of a
/// cancelled one.
#[tokio::test]
async fn callbacks_carry_content_length_and_are_not_chunked() -> Result<()> {
    let app = fixture_app().await?;
    let receiver = LengthOnlyReceiver::start().await?;
    let session = unique("strict-callback");
    let completed = app.create_id(&session, json!({"to": "ann@example.com"}), Some(&receiver.url)).await?;
    let cancelled = app.create_id(&session, json!({"to": "bob@example.com"}), Some(&receiver.url)).await?;
    ensure!(app.confirm(&completed).await?.status == 202);
    app.wait_for(&completed, "PREPARED", SETTLE).await?;
    let kind = |r: &raw::ReceivedRaw, wanted: &str| r.header("x-gatehouse-callback") == Some(wanted);
    receiver
        .wait_until(SETTLE, "the checkpoint callback", |received| received.iter().any(|r| kind(r, "checkpoint")))
        .await?;
    ensure!(app.resume(&completed, "proceed").await?.status == 202);
    app.wait_for(&completed, "COMPLETED", SETTLE).await?;
    ensure!(app.cancel(&cancelled).await?.status == 200);
    let received = receiver
        .wait_until(SETTLE, "two completion callbacks", |received| {
            received.iter().filter(|r| kind(r, "completion")).count() >= 2
        })
        .await?;

    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
    for callback in &received {
        let what = format!("{} {:?}", callback.request_line, callback.headers);
        let lengths = callback.all("content-length");
        ensure!(lengths.len() == 1, "a callback without exactly one Content-Length: {what}");
        ensure!(
            lengths[0].parse::<usize>().ok() == Some(callback.body.len()),
            "Content-Length is not the body's: {what}"
        );
        ensure!(
            callback.all("transfer-encoding").iter().all(|v| !v.to_ascii_lowercase().contains("chunked")),
            "a chunked callback: {what}"
        );
        ensure!(!callback.body.is_empty(), "a callback with an empty body: {what}");
        let signature = callback.header("x-gatehouse-signature").with_context(|| format!("unsigned: {what}"))?;
        let target = callback.request_line.split(' ').nth(1).unwrap_or_default();
        ensure!(
            callback::verify(&[CALLBACK_SECRET.as_bytes()], Some(signature), target, &callback.body, now).is_ok(),
            "the signature does not verify over the body received: {what}"
        );
        let payload: Value = serde_json::from_slice(&callback.body)?;
        ensure!(
            payload["tool_call_id"] == completed.as_str() || payload["tool_call_id"] == cancelled.as_str(),
            "a callback for another call: {payload}"
        );
    }
    let payloads: Vec<Value> = received.iter().filter_map(|r| serde_json::from_slice(&r.body).ok()).collect();
    for (id, status) in [(&completed, "COMPLETED"), (&cancelled, "CANCELLED")] {
        ensure!(
            payloads.iter().any(|p| p["tool_call_id"] == id.as_str() && p["status"] == status),
            "no {status} completion for {id}: {payloads:?}"
        );
    }
    Ok(())
}
