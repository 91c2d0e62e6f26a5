//! A declared tool end to end (docs/tools.md, "A declared tool"): tools/book_table.toml, served
//! by the generic `declared-tool` component, against a reservation service started as a
//! separate HTTP server (tests/support/reservations.rs), through the whole lifecycle.
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{App, CALLBACK_SECRET, Relay, ScratchDatabase};
use gatehouse_tests::reservations::{HoldState, Reservations};
use gatehouse_tests::{RunnerOptions, unique, workspace_root};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);

async fn app(reservations: &Reservations) -> Result<App> {
    app_with(reservations, &[], &[]).await
}

/// The application with the declared tool pointed at `reservations`, `extra` variables and
/// `args` for `gatehouse up`.
pub(crate) async fn app_with(reservations: &Reservations, extra: &[(&str, &str)], args: &[&str]) -> Result<App> {
    start(options(reservations, extra, args)).await
}

fn options(reservations: &Reservations, extra: &[(&str, &str)], args: &[&str]) -> RunnerOptions {
    let mut variables = vec![("callback_secret".to_owned(), CALLBACK_SECRET.to_owned())];
    variables.extend(extra.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())));
    variables.extend(reservations.variables().into_iter().map(|(name, value)| (name.to_owned(), value)));
    let extra_args = args.iter().map(|arg| (*arg).to_owned()).collect();
    RunnerOptions { variables, extra_args, ..Default::default() }
}

async fn start(options: RunnerOptions) -> Result<App> {
    App::start_on(&workspace_root().join("tests/fixtures/declared.toml"), options).await
}

pub(crate) fn booking(session: &str, relay: &Relay) -> Value {
    json!({
        "session_id": session,
        "function_name": "book_table",
        "parameters": {"name": "Ada", "party_size": 4, "date": "2026-12-01", "time": "19:30"},
        "callback_url": relay.url,
    })
}

/// A booking created and confirmed, stopped at its checkpoint with the table held.
pub(crate) async fn held_at_checkpoint(app: &App, relay: &Relay, label: &str) -> Result<String> {
    let created = app.send(Method::POST, "/voice-tools/pending", Some(booking(&unique(label), relay))).await?;
    ensure!(created.status == 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    Ok(id)
}

#[tokio::test]
async fn a_declared_tool_holds_books_once_and_reports_like_any_other_tool() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let session = unique("declared");

    let created = app.send(Method::POST, "/voice-tools/pending", Some(booking(&session, &relay))).await?;
    ensure!(created.status == 201, "{}", created.body);
    let message = created.body["message"].as_str().unwrap_or_default();
    ensure!(message.starts_with("A table for 4 on 2026-12-01 at 19:30 under the name Ada."), "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(reservations.received().is_empty(), "nothing reaches the backend before the caller confirms");

    let modified = app
        .send(
            Method::PATCH,
            &format!("/voice-tools/modify/{id}"),
            Some(json!({"parameters": {"party_size": 5}, "reason": "the caller is bringing a friend"})),
        )
        .await?;
    ensure!(modified.status == 200, "{}", modified.body);
    ensure!(modified.body["message"].as_str().is_some_and(|m| m.contains("A table for 5")), "{}", modified.body);

    let confirmed = app.confirm(&id).await?;
    ensure!(confirmed.status == 202, "{}", confirmed.body);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(
        checkpoint.body["message"] == "I'm holding a table for 5 at 19:30 on 2026-12-01. Shall I confirm the booking?",
        "{}",
        checkpoint.body
    );
    let holds = reservations.holds();
    ensure!(holds.len() == 1 && holds[0].state == HoldState::Held, "{holds:?}");
    ensure!(holds[0].request["party_size"] == 5, "the corrected value reached the backend: {:?}", holds[0].request);

    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(
        completion.body["voice_response"]
            == "You're booked: a table for 5 at 19:30 on 2026-12-01. Your confirmation is R-h1.",
        "{}",
        completion.body
    );
    ensure!(
        completion.body["result"]
            == json!({"confirmation": "R-h1", "date": "2026-12-01", "time": "19:30", "party_size": 5})
    );
    ensure!(reservations.holds()[0].state == HoldState::Booked);

    let received = reservations.received();
    let paths: Vec<String> = received.iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    ensure!(paths == ["POST /holds", "POST /holds/h1/confirm"], "each step once: {paths:?}");
    for request in &received {
        ensure!(request.signature_valid && request.authorized, "signed and authorized: {request:?}");
    }
    ensure!(received[0].idempotency_key.as_deref() == Some(format!("gatehouse-book_table-{id}-prepare").as_str()));
    ensure!(received[1].idempotency_key.as_deref() == Some(format!("gatehouse-book_table-{id}-execute").as_str()));

    // Its history and its place in the tool list, like any other tool.
    let tools = app.send(Method::GET, "/voice-tools/tools", None).await?;
    let listed = tools.body["tools"].as_array().context("a tool list")?;
    let book_table = listed.iter().find(|t| t["name"] == "book_table").context("book_table is listed")?;
    ensure!(book_table["needs_checkpoint"] == true, "{book_table}");
    let executions = app.send(Method::GET, "/voice-tools/tools/book_table/executions", None).await?;
    ensure!(executions.status == 200, "{}", executions.body);
    let operations: Vec<&str> = executions.body["executions"]
        .as_array()
        .context("executions")?
        .iter()
        .filter(|e| e["tool_call_id"] == id.as_str())
        .filter_map(|e| e["operation"].as_str())
        .collect();
    for operation in ["validate", "prepare", "execute"] {
        ensure!(operations.contains(&operation), "{operation} recorded: {operations:?}");
    }
    let stats = app.send(Method::GET, "/voice-tools/tools/book_table/stats", None).await?;
    ensure!(stats.body["by_operation"]["execute"]["ok"].as_i64() >= Some(1), "{}", stats.body);

    // MCP lists it as a tool of its own, with its parameters' schema and the answers' schema.
    let listed = crate::mcp::modern(&app, "tools/list", json!({})).await?;
    let tools = listed.body["result"]["tools"].as_array().context("MCP tools")?;
    let book_table = tools.iter().find(|t| t["name"] == "book_table").context("book_table is an MCP tool")?;
    ensure!(book_table["inputSchema"]["properties"]["party_size"]["maximum"] == 12, "{book_table}");
    ensure!(book_table["outputSchema"]["type"] == "object", "{book_table}");
    ensure!(book_table["annotations"]["openWorldHint"] == true, "{book_table}");
    Ok(())
}

/// The backend books the table but answers after the tool's timeout (5 s). The declaration says
/// the backend honours `Idempotency-Key`, so the execute is sent again with the same key and the
/// backend answers its first answer: one booking, and the call completes with it.
#[tokio::test]
async fn a_backend_that_answers_after_the_timeout_books_once_and_the_call_is_true() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let id = held_at_checkpoint(&app, &relay, "late").await?;

    reservations.delay_confirm_answers(Duration::from_secs(6));
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", Duration::from_secs(40)).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(completion.body["result"]["confirmation"] == "R-h1", "{}", completion.body);
    let confirms: Vec<_> = reservations.received().into_iter().filter(|r| r.path == "/holds/h1/confirm").collect();
    ensure!(confirms.len() == 2, "sent again after the timeout: {confirms:?}");
    ensure!(confirms[0].idempotency_key == confirms[1].idempotency_key, "with the same key");
    let booked = reservations.holds().iter().filter(|h| h.state == HoldState::Booked).count();
    ensure!(booked == 1, "booked once: {:?}", reservations.holds());
    Ok(())
}

/// Issue 49: a 503 without `Retry-After` from a backend that honours the key is sent again
/// (the docs say "after a timeout or a 5xx too"), with the same key, and books once.
#[tokio::test]
async fn a_503_without_retry_after_is_sent_again_to_a_backend_that_honours_the_key() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let id = held_at_checkpoint(&app, &relay, "busy").await?;

    reservations.fail_next_confirms(&[503]);
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    let confirms: Vec<_> = reservations.received().into_iter().filter(|r| r.path == "/holds/h1/confirm").collect();
    ensure!(confirms.len() == 2, "sent again after the 503: {confirms:?}");
    ensure!(confirms[0].idempotency_key == confirms[1].idempotency_key, "with the same key");
    let booked = reservations.holds().iter().filter(|h| h.state == HoldState::Booked).count();
    ensure!(booked == 1, "booked once: {:?}", reservations.holds());
    Ok(())
}

/// Issue 49: a booking the backend turns down (a definite failure) ends FAILED with the
/// backend's sentence, and the hold is released by exactly one discard.
#[tokio::test]
async fn a_refused_execute_fails_the_call_and_releases_the_hold_once() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let id = held_at_checkpoint(&app, &relay, "full").await?;

    reservations.fail_next_confirms(&[422]);
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "FAILED", "{}", completion.body);
    let said = completion.body["voice_response"].as_str().unwrap_or_default();
    ensure!(said.contains("The restaurant is full that night."), "{}", completion.body);
    let deadline = std::time::Instant::now() + SETTLE;
    while reservations.holds().first().map(|h| h.state.clone()) != Some(HoldState::Released) {
        ensure!(std::time::Instant::now() < deadline, "the hold was not released: {:?}", reservations.holds());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let paths: Vec<String> = reservations.received().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    ensure!(
        paths == ["POST /holds", "POST /holds/h1/confirm", "DELETE /holds/h1"],
        "one confirm, then one discard: {paths:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_cancel_at_the_checkpoint_releases_the_hold() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let id = held_at_checkpoint(&app, &relay, "release").await?;

    let cancelled = app.resume(&id, "cancel").await?;
    ensure!(cancelled.status == 200, "{}", cancelled.body);
    let deadline = std::time::Instant::now() + SETTLE;
    while reservations.holds().first().map(|h| h.state.clone()) != Some(HoldState::Released) {
        ensure!(std::time::Instant::now() < deadline, "the hold was not released: {:?}", reservations.holds());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let paths: Vec<String> = reservations.received().iter().map(|r| format!("{} {}", r.method, r.path)).collect();
    ensure!(paths == ["POST /holds", "DELETE /holds/h1"], "never booked: {paths:?}");
    Ok(())
}

/// A backend that checks signatures as docs/tools.md says (tests/support/reservations.rs) refuses
/// a captured signed `DELETE /holds/h1` sent to another hold, and the same request sent again:
/// the signature binds the path and the `Idempotency-Key`, and its nonce is good once. The
/// other hold stays held (issue 49: a release re-targeted at H3 released it).
#[tokio::test]
async fn a_captured_backend_request_is_refused_elsewhere_and_when_replayed() -> Result<()> {
    use gatehouse_domain::signing::Refusal;
    use gatehouse_tests::reservations::API_KEY;

    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let relay = Relay::start().await?;
    let first = held_at_checkpoint(&app, &relay, "captured").await?;
    let _second = held_at_checkpoint(&app, &relay, "retargeted").await?;
    ensure!(app.resume(&first, "cancel").await?.status == 200);
    let deadline = std::time::Instant::now() + SETTLE;
    let captured = loop {
        if let Some(release) = reservations.received().into_iter().find(|r| r.method == "DELETE") {
            break release;
        }
        ensure!(std::time::Instant::now() < deadline, "h1 was not released: {:?}", reservations.received());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    ensure!(captured.path == "/holds/h1" && captured.signature_valid, "{captured:?}");
    let signature = captured.signature.clone().context("the release was signed")?;
    let key = captured.idempotency_key.clone().context("the release had a key")?;

    let http = reqwest::Client::new();
    let send_again = |path: &str| {
        http.delete(format!("{}{path}", reservations.url))
            .header("authorization", format!("Bearer {API_KEY}"))
            .header("idempotency-key", key.clone())
            .header("x-gatehouse-signature", signature.clone())
            .body(captured.raw_body.clone())
            .send()
    };
    let retargeted = send_again("/holds/h2").await?;
    ensure!(retargeted.status() == 401, "re-targeted at h2: {}", retargeted.status());
    let replayed = send_again("/holds/h1").await?;
    ensure!(replayed.status() == 401, "replayed: {}", replayed.status());

    let received = reservations.received();
    let refusals: Vec<Option<Refusal>> = received.iter().rev().take(2).rev().map(|r| r.refused_as).collect();
    ensure!(refusals == [Some(Refusal::Mismatch), Some(Refusal::Replayed)], "{refusals:?}");
    let states: Vec<HoldState> = reservations.holds().into_iter().map(|hold| hold.state).collect();
    ensure!(states == [HoldState::Released, HoldState::Held], "h2 is still held: {states:?}");
    Ok(())
}

/// The runner killed with `kill -9` after the backend booked and before its answer was
/// recorded: the host started again re-drives the call, the `execute` goes out again with the
/// same key, the backend answers what it answered the first time, and the call completes with
/// one booking.
#[tokio::test]
async fn a_runner_killed_between_the_booking_and_its_record_books_once() -> Result<()> {
    let reservations = Reservations::start().await?;
    // A database of its own: no other test's sweeper re-drives this call against its backend.
    let scratch = ScratchDatabase::create("killed").await?;
    let options =
        scratch.serve(options(&reservations, &[("execution_lease_seconds", "2")], &["--sweep-interval", "0.2"]));
    let mut first = start(options.clone()).await?;
    let relay = Relay::start().await?;
    let id = held_at_checkpoint(&first, &relay, "killed").await?;

    // The backend books at once and answers late: the host dies in between.
    reservations.delay_confirm_answers(Duration::from_secs(30));
    ensure!(first.resume(&id, "proceed").await?.status == 202);
    let deadline = std::time::Instant::now() + SETTLE;
    while reservations.holds().first().map(|h| h.state.clone()) != Some(HoldState::Booked) {
        ensure!(std::time::Instant::now() < deadline, "never booked: {:?}", reservations.holds());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    first.runner.signal("KILL")?;
    first.runner.wait_for_exit(Duration::from_secs(10))?;
    ensure!(first.status(&id).await.is_err(), "the host is gone");
    reservations.delay_confirm_answers(Duration::ZERO);

    let second = start(options).await?;
    let call = second.wait_for(&id, "COMPLETED", Duration::from_secs(30)).await?;
    ensure!(call["result"]["confirmation"] == "R-h1", "{call}");
    let booked = reservations.holds().iter().filter(|h| h.state == HoldState::Booked).count();
    ensure!(booked == 1, "one booking: {:?}", reservations.holds());
    let executes: Vec<Option<String>> = reservations
        .received()
        .into_iter()
        .filter(|r| r.path.ends_with("/confirm"))
        .map(|r| r.idempotency_key)
        .collect();
    ensure!(executes.len() == 2 && executes[0] == executes[1], "sent again with the same key: {executes:?}");
    Ok(())
}

#[tokio::test]
async fn parameters_outside_the_schema_are_refused_in_words_and_nothing_is_sent() -> Result<()> {
    let reservations = Reservations::start().await?;
    let app = app(&reservations).await?;
    let body = json!({
        "session_id": unique("schema"),
        "function_name": "book_table",
        "parameters": {"name": "Ada", "party_size": 40, "date": "next friday", "time": "19:30"},
    });
    let refused = app.send(Method::POST, "/voice-tools/pending", Some(body)).await?;
    ensure!(refused.status == 422, "{}", refused.body);
    let fields: Vec<String> = refused.body["fields"]
        .as_array()
        .context("fields")?
        .iter()
        .map(|f| format!("{} {}", f["field"].as_str().unwrap_or_default(), f["problem"].as_str().unwrap_or_default()))
        .collect();
    ensure!(fields.contains(&"party_size must be at most 12".to_owned()), "{fields:?}");
    ensure!(fields.contains(&"date must be a valid date".to_owned()), "{fields:?}");
    ensure!(reservations.received().is_empty());
    Ok(())
}

/// A folder under target/ holding a copy of spin.toml and tools/, where `gatehouse tools` may
/// write.
fn scratch_project() -> Result<std::path::PathBuf> {
    let root = workspace_root();
    let dir = root.join("target").join(unique("declared-project"));
    std::fs::create_dir_all(dir.join("tools"))?;
    std::fs::copy(root.join("spin.toml"), dir.join("spin.toml"))?;
    std::fs::copy(root.join("tools/book_table.toml"), dir.join("tools/book_table.toml"))?;
    Ok(dir)
}

fn gatehouse(args: &[&str], dir: &std::path::Path) -> Result<std::process::Output> {
    Ok(std::process::Command::new(gatehouse_tests::gatehouse_bin()).args(args).current_dir(dir).output()?)
}

#[test]
fn tools_add_registers_a_declaration_in_spin_toml_in_one_step() -> Result<()> {
    let dir = scratch_project()?;
    let added = gatehouse(&["tools", "add", "tools/book_table.toml"], &dir)?;
    ensure!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let stdout = String::from_utf8_lossy(&added.stdout);
    ensure!(stdout.contains("SPIN_VARIABLE_BOOK_TABLE_SIGNING_SECRET"), "{stdout}");

    let text = std::fs::read_to_string(dir.join("spin.toml"))?;
    let original = std::fs::read_to_string(workspace_root().join("spin.toml"))?;
    let first_comment = original.lines().find(|l| l.starts_with('#')).context("spin.toml has comments")?;
    ensure!(text.contains(first_comment), "the manifest's comments are kept");
    let manifest: toml::Value = toml::from_str(&text)?;
    let component = &manifest["component"]["book-table"];
    ensure!(component["source"].as_str() == Some("target/wasm32-wasip2/release/declared_tool.wasm"), "{component}");
    ensure!(
        component["files"].as_array().is_some_and(|f| f.len() == 1 && f[0].as_str() == Some("tools/book_table.toml"))
    );
    ensure!(component["variables"]["declaration"].as_str() == Some("/tools/book_table.toml"));
    ensure!(component["variables"]["signing_secret"].as_str() == Some("{{ book_table_signing_secret }}"));
    let hosts: Vec<&str> = component["allowed_outbound_hosts"]
        .as_array()
        .context("hosts")?
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    ensure!(hosts == ["postgres://{{ db_host }}", "{{ reservations_url }}"], "only the backend: {hosts:?}");
    let registry = manifest["variables"]["tool_registry"]["default"].as_str().unwrap_or_default();
    ensure!(registry.ends_with(",book_table|reserve_table=book-table"), "{registry}");
    for variable in ["reservations_url", "reservations_api_key", "book_table_signing_secret"] {
        ensure!(manifest["variables"].get(variable).is_some(), "{variable} declared");
    }
    ensure!(manifest["variables"]["reservations_api_key"]["secret"].as_bool() == Some(true));
    let routes: Vec<String> = manifest["trigger"]["http"]
        .as_array()
        .context("triggers")?
        .iter()
        .filter(|t| t["component"].as_str() == Some("book-table"))
        .map(|t| t["route"].to_string())
        .collect();
    ensure!(routes.len() == 2 && routes[1] == "\"/internal/tools/book-table/...\"", "{routes:?}");

    let checked = gatehouse(&["tools", "check"], &dir)?;
    ensure!(checked.status.success(), "{}", String::from_utf8_lossy(&checked.stderr));
    let again = gatehouse(&["tools", "add", "tools/book_table.toml"], &dir)?;
    ensure!(!again.status.success(), "a tool is added once");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[test]
fn bad_declarations_are_refused_before_anything_starts_with_the_file_the_field_and_why() -> Result<()> {
    let dir = scratch_project()?;
    let good = std::fs::read_to_string(dir.join("tools/book_table.toml"))?;
    let cases = [
        ("bad_schema", good.replace("type = \"integer\"", "type = \"integr\""), "parameters"),
        (
            "unknown_variable",
            good.replace("{{ parameters.time }} under", "{{ parameters.hour }} under"),
            "confirm: {{ parameters.hour }}",
        ),
        (
            "inline_secret",
            good.replacen("Bearer {{ secrets.reservations_api_key }}", "Bearer sk-live-1", 1),
            "prepare.headers.authorization",
        ),
    ];
    for (name, text, field) in &cases {
        let file = format!("tools/{name}.toml");
        std::fs::write(dir.join(&file), text)?;
        let checked = gatehouse(&["tools", "check", &file], &dir)?;
        let said = String::from_utf8_lossy(&checked.stderr);
        ensure!(!checked.status.success() && said.contains(&format!("{file}: {field}")), "{name}: {said}");
    }

    // `up` refuses a manifest whose declared tool is broken, or may not reach its backend,
    // before it serves anything.
    let added = gatehouse(&["tools", "add", "tools/book_table.toml"], &dir)?;
    ensure!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let manifest = dir.join("spin.toml");
    let text = std::fs::read_to_string(&manifest)?;
    std::fs::write(&manifest, text.replace("\"{{ reservations_url }}\"]", "]"))?;
    let options = RunnerOptions {
        variables: vec![("reservations_url".into(), "http://127.0.0.1:9".into())],
        ..Default::default()
    };
    let (status, stderr) = gatehouse_tests::start_expecting_failure(&manifest, options)?;
    ensure!(!status.success(), "up refused");
    ensure!(
        stderr.contains("component 'book-table'")
            && stderr
                .contains("backend.url: the component's allowed_outbound_hosts does not name {{ reservations_url }}"),
        "{stderr}"
    );
    std::fs::write(dir.join("tools/book_table.toml"), &cases[1].1)?;
    std::fs::write(&manifest, text)?;
    let (status, stderr) = gatehouse_tests::start_expecting_failure(&manifest, RunnerOptions::default())?;
    ensure!(!status.success() && stderr.contains("book_table.toml: confirm: {{ parameters.hour }}"), "{stderr}");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
