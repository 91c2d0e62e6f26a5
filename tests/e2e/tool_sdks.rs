//! Tools written with the SDKs (docs/tools.md, "A tool in any language"): a team's own Python web
//! service serving a tool with the gatehouse-tool package, from a process and a port of its own,
//! signed; it keeps the contract by the conformance kit, completes a call with a checkpoint
//! through the lifecycle, releases its hold on a cancel, and has its history recorded for it.
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_tests::lifecycle::{App, CALLBACK_SECRET, Relay, ScratchDatabase};
use gatehouse_tests::python_service::PythonService;
use gatehouse_tests::{RunnerOptions, app_manifest, gatehouse_bin, unique};
use reqwest::Method;
use serde_json::{Value, json};

const SECRET: &str = "tool-sdks-contract-secret";
const SETTLE: Duration = Duration::from_secs(20);

#[tokio::test]
async fn a_python_service_keeps_the_contract() -> Result<()> {
    let clinic = PythonService::start_clinic(SECRET).await?;
    let output = tokio::process::Command::new(gatehouse_bin())
        .args(["tools", "check", &clinic.contract_url])
        .env("GATEHOUSE_CONTRACT_SECRET", SECRET)
        .output()
        .await?;
    let printed = String::from_utf8_lossy(&output.stdout);
    ensure!(output.status.success(), "{printed}{}", String::from_utf8_lossy(&output.stderr));
    ensure!(printed.lines().filter(|line| line.contains("  pass")).count() == 11, "every rule passes:\n{printed}");
    let book = clinic.book().await?;
    ensure!(book["moves"].as_array().is_some_and(|moves| moves.len() == 1), "the kit's execute ran once: {book}");
    ensure!(book["holds"] == json!({}), "the kit's discarded hold was released: {book}");
    Ok(())
}

fn move_appointment(session: &str, relay: &Relay, new_time: &str) -> Value {
    json!({
        "session_id": session,
        "function_name": "reschedule_appointment",
        "parameters": {"appointment_id": "A-101", "new_time": new_time},
        "callback_url": relay.url,
    })
}

#[tokio::test]
async fn a_python_service_completes_a_call_with_a_checkpoint_and_its_history_is_recorded() -> Result<()> {
    let clinic = PythonService::start_clinic(SECRET).await?;
    let scratch = ScratchDatabase::create("tool-sdk").await?;
    let variables = [
        ("callback_secret", CALLBACK_SECRET.to_owned()),
        ("contract_secret", SECRET.to_owned()),
        ("tool_registry", format!("move_appointment|reschedule_appointment={}", clinic.contract_url)),
        ("tools_origin", "http://127.0.0.1:*".to_owned()),
    ];
    let variables = variables.into_iter().map(|(name, value)| (name.to_owned(), value)).collect();
    let app = App::start_on(&app_manifest(), scratch.serve(RunnerOptions { variables, ..Default::default() })).await?;
    let relay = Relay::start().await?;

    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(move_appointment(&unique("clinic"), &relay, "2026-12-03T11:30")),
        )
        .await?;
    ensure!(created.status == 201, "{}", created.body);
    ensure!(
        created.body["message"] == "I'll move appointment A-101 to 2026-12-03 at 11:30. Shall I?",
        "{}",
        created.body
    );
    let id = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&id).await?.status == 202);
    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    ensure!(
        checkpoint.body["message"] == "I've held 2026-12-03 at 11:30. Shall I move the appointment?",
        "{}",
        checkpoint.body
    );
    ensure!(clinic.book().await?["holds"]["2026-12-03T11:30"] == id.as_str(), "the slot is held for the call");
    ensure!(app.resume(&id, "proceed").await?.status == 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    ensure!(completion.body["status"] == "COMPLETED", "{}", completion.body);
    ensure!(completion.body["voice_response"] == "Done: A-101 is now at 2026-12-03 at 11:30.", "{}", completion.body);
    let book = clinic.book().await?;
    ensure!(book["moves"] == json!([["A-101", "2026-12-03T11:30"]]) && book["holds"] == json!({}), "{book}");

    // A cancel at the checkpoint has the tool release its hold.
    let created = app
        .send(
            Method::POST,
            "/voice-tools/pending",
            Some(move_appointment(&unique("clinic"), &relay, "2026-12-04T08:00")),
        )
        .await?;
    let cancelled = created.body["tool_call_id"].as_str().context("an id")?.to_owned();
    ensure!(app.confirm(&cancelled).await?.status == 202);
    relay.wait_for(&cancelled, "checkpoint", SETTLE).await?;
    ensure!(!clinic.book().await?["holds"].as_object().context("holds")?.is_empty(), "held at the checkpoint");
    ensure!(app.cancel(&cancelled).await?.status == 200);
    let deadline = Instant::now() + SETTLE;
    while clinic.book().await?["holds"] != json!({}) {
        if Instant::now() > deadline {
            bail!("the hold was never released: {}", clinic.book().await?);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The service writes no history; the lifecycle wrote a row for each operation, with its
    // duration and outcome.
    let deadline = Instant::now() + SETTLE;
    let stats = loop {
        let stats = app.send(Method::GET, "/voice-tools/tools/move_appointment/stats", None).await?;
        ensure!(stats.status == 200, "{}", stats.body);
        if stats.body["by_operation"]["discard"]["ok"] == 1 {
            break stats.body;
        }
        if Instant::now() > deadline {
            bail!("the stats never showed the discard: {}", stats.body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for (operation, count) in [("validate", 2), ("prepare", 2), ("execute", 1), ("discard", 1)] {
        let counted = &stats["by_operation"][operation];
        ensure!(counted["executions"] == count && counted["ok"] == count, "{operation}: {stats}");
    }
    let page = app.send(Method::GET, "/voice-tools/tools/move_appointment/executions", None).await?;
    let executions = page.body["executions"].as_array().context("executions")?;
    ensure!(executions.len() == 6, "{}", page.body);
    ensure!(
        executions.iter().all(|e| e["outcome"] == "ok" && e["duration_ms"].as_f64().is_some_and(|ms| ms > 0.0)),
        "{}",
        page.body
    );
    ensure!(executions.iter().all(|e| e["component"] == clinic.contract_url.as_str()), "{}", page.body);
    Ok(())
}
