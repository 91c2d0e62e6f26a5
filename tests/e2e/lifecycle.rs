//! The tool-call lifecycle end to end (docs/architecture.md, "The lifecycle", "Callbacks"): the
//! application's components and the test-only fixture tool, served by the runner, on the real
//! PostgreSQL, driven over HTTP.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{Result, ensure};
use futures::future::join_all;
use gatehouse_tests::lifecycle::{App, ProgressReply, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{RunnerOptions, db, unique};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);

/// The lifecycle runner most tests use: default variables, sweeping every 0.2 s.
fn sweeping() -> RunnerOptions {
    lifecycle_options(&[], &["--sweep-interval", "0.2"])
}

async fn app() -> Result<App> {
    App::start(sweeping()).await
}

/// An application on a database of its own. Tests whose calls crash or lose their worker need
/// one: every runner's sweeper takes over any stranded call in its database, so on the shared
/// database another test's runner would re-drive these calls (and could be stopped mid-drive,
/// leaving them to its longer lease), and the attempt counts would not be this test's.
async fn isolated_app(scratch: &ScratchDatabase) -> Result<App> {
    App::start(scratch.serve(sweeping())).await
}

async fn effects(app: &App, id: &str) -> Result<i64> {
    let db = app.db().await?;
    Ok(db.query_one("SELECT count(*) FROM fixture_tool_effects WHERE tool_call_id = $1", &[&id]).await?.get(0))
}

async fn operations(app: &App, id: &str, operation: &str) -> Result<i64> {
    let db = app.db().await?;
    Ok(db
        .query_one(
            "SELECT count(*) FROM fixture_tool_log WHERE tool_call_id = $1 AND operation = $2",
            &[&id, &operation],
        )
        .await?
        .get(0))
}

/// `operations(id, operation)` once it reaches `expected`, or after about 5 s, whichever is first:
/// the tool logs some operations after the answer the test waits on.
async fn operations_reaching(app: &App, id: &str, operation: &str, expected: i64) -> Result<i64> {
    for _ in 0..250 {
        let count = operations(app, id, operation).await?;
        if count == expected {
            return Ok(count);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    operations(app, id, operation).await
}

fn statuses(call: &Value) -> Vec<String> {
    call["status_history"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["status"].as_str().map(str::to_owned))
        .collect()
}

/// The seed's conversation: wrong address, corrected, confirmed, checkpoint, proceed, sent.
#[tokio::test]
async fn the_seed_conversation_step_by_step() -> Result<()> {
    let app = app().await?;
    let relay = Relay::start().await?;
    let session = unique("seed");
    let created =
        app.create(&session, json!({"to": "john@gmail.com", "subject": "Meeting Tomorrow"}), Some(&relay.url)).await?;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["status"], "PENDING");
    assert_eq!(
        created.body["message"],
        "I'll send a message to john@gmail.com about 'Meeting Tomorrow'. Confirm to proceed."
    );
    assert_eq!(created.body["actions_available"], json!(["confirm", "modify", "cancel"]));
    assert!(created.body["expires_at"].is_string());
    let id = created.body["tool_call_id"].as_str().unwrap_or_default().to_owned();
    assert!(id.starts_with("tc_") && id.len() == 15, "{id}");

    let modified = app
        .send(
            Method::PATCH,
            &format!("/voice-tools/modify/{id}"),
            Some(json!({"parameters": {"to": "john.smith@gmail.com"}, "reason": "caller corrected the address"})),
        )
        .await?;
    assert_eq!(modified.status, 200, "{}", modified.body);
    assert_eq!(modified.body["updated_parameters"]["to"], "john.smith@gmail.com");
    assert_eq!(modified.body["updated_parameters"]["subject"], "Meeting Tomorrow");
    assert_eq!(
        modified.body["modification_applied"],
        json!({"field": "to", "old": "john@gmail.com", "new": "john.smith@gmail.com"})
    );
    assert!(modified.body["message"].as_str().unwrap_or_default().contains("john.smith@gmail.com"));

    let call = app.status(&id).await?.body;
    let history = &call["parameters_history"];
    assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
    assert_eq!(history[0]["field"], "to");
    assert_eq!(history[0]["old_value"], "john@gmail.com");
    assert_eq!(history[0]["new_value"], "john.smith@gmail.com");
    assert_eq!(history[0]["reason"], "caller corrected the address");
    assert!(history[0]["timestamp"].is_string());
    assert_eq!(statuses(&call), ["PENDING", "MODIFIED"]);

    let confirmed = app.confirm(&id).await?;
    assert_eq!(confirmed.status, 202, "{}", confirmed.body);
    assert_eq!(confirmed.body["status"], "EXECUTING");
    assert!(confirmed.body["message"].is_string());

    let checkpoint = relay.wait_for(&id, "checkpoint", SETTLE).await?;
    assert_eq!(checkpoint.body["status"], "PREPARED");
    assert_eq!(checkpoint.body["checkpoint"], "ready_to_execute");
    assert_eq!(checkpoint.body["resume_webhook"], format!("/resume-execution/{id}"));
    assert_eq!(checkpoint.body["message"], "Ready to send to john.smith@gmail.com. Shall I go ahead?");
    assert_eq!(app.status(&id).await?.body["status"], "PREPARED");

    let resumed = app.resume(&id, "proceed").await?;
    assert_eq!(resumed.status, 202, "{}", resumed.body);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "COMPLETED");
    assert_eq!(completion.body["session_id"], session);
    assert_eq!(completion.body["voice_response"], "Done: the message to john.smith@gmail.com was sent.");
    assert_eq!(completion.body["result"]["to"], "john.smith@gmail.com");
    assert!(completion.body["execution_time_ms"].as_i64().is_some_and(|ms| ms >= 0));

    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    assert_eq!(statuses(&call), ["PENDING", "MODIFIED", "EXECUTING", "PREPARED", "EXECUTING", "COMPLETED"]);
    for field in ["confirmed_at", "prepared_at", "executed_at", "completed_at", "side_effect_started_at"] {
        assert!(call[field].is_string(), "{field} missing: {call}");
    }
    assert_eq!(effects(&app, &id).await?, 1);

    let context = app.send(Method::GET, &format!("/voice-tools/context/{session}"), None).await?;
    assert_eq!(context.body["pending"], json!([]));
    assert_eq!(context.body["recent"][0]["tool_call_id"], id);
    assert_eq!(context.body["recent"][0]["status"], "COMPLETED");

    let callbacks = relay.for_call(&id);
    let kinds: Vec<&str> = callbacks.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(kinds, ["progress", "checkpoint", "completion"]);
    for callback in &callbacks {
        assert!(callback.signature_valid, "bad signature on {callback:?}");
        assert_eq!(callback.body["trace_id"], call["trace_id"]);
    }
    // Every delivery attempt and every tool operation is recorded, after the answers went out,
    // so the rows may land a moment after the callbacks.
    let db = db().await?;
    let (mut attempts, mut executions) = (0, Vec::new());
    for _ in 0..300 {
        attempts = db
            .query_one("SELECT count(*) FROM callback_attempts WHERE tool_call_id = $1 AND status_code = 200", &[&id])
            .await?
            .get::<_, i64>(0);
        executions = db
            .query("SELECT operation FROM tool_executions WHERE tool_call_id = $1 ORDER BY execution_id", &[&id])
            .await?
            .iter()
            .map(|r| r.get::<_, String>(0))
            .collect::<Vec<_>>();
        if attempts == 3 && executions.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(attempts, 3);
    // The create's validate ran before the call had an id; the modify's did not.
    assert_eq!(executions, ["validate", "prepare", "execute"], "{executions:?}");
    Ok(())
}

#[tokio::test]
async fn cancel_at_pending_then_every_other_action_is_refused() -> Result<()> {
    let app = app().await?;
    let id = app.create_id(&unique("cancel"), json!({"to": "a@example.com"}), None).await?;
    let cancelled = app.cancel(&id).await?;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.body["status"], "CANCELLED");
    assert_eq!(cancelled.body["message"], "Okay, I've cancelled that. Nothing was done.");

    let again = app.cancel(&id).await?;
    assert_eq!((again.status, again.body["code"].as_str()), (409, Some("invalid_state")));
    assert_eq!(again.body["status"], "CANCELLED");
    let confirm = app.confirm(&id).await?;
    assert_eq!(confirm.status, 409);
    assert_eq!(confirm.body["error"], "Cannot confirm non-pending tool call");
    assert_eq!(confirm.body["status"], "CANCELLED");
    assert_eq!(confirm.body["tool_call_id"], id);
    let modify = app
        .send(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(json!({"parameters": {"to": "b@x.io"}})))
        .await?;
    assert_eq!(modify.status, 409);
    assert_eq!(effects(&app, &id).await?, 0);
    Ok(())
}

/// A relay that loops on modify cannot grow a call's histories (which every status answer
/// carries) without end: after the 50th correction the next one is refused and nothing changes.
#[tokio::test]
async fn a_call_takes_at_most_fifty_corrections() -> Result<()> {
    let app = app().await?;
    let id = app.create_id(&unique("corrections"), json!({"to": "a0@example.com"}), None).await?;
    let path = format!("/voice-tools/modify/{id}");
    let modify =
        |n: usize| app.send(Method::PATCH, &path, Some(json!({"parameters": {"to": format!("a{n}@example.com")}})));
    for n in 1..=50 {
        let answer = modify(n).await?;
        assert_eq!(answer.status, 200, "correction {n}: {}", answer.body);
    }
    let refused = modify(51).await?;
    assert_eq!((refused.status, refused.body["code"].as_str()), (409, Some("invalid_state")), "{}", refused.body);
    assert_eq!(refused.body["status"], "PENDING");
    let call = app.status(&id).await?.body;
    assert_eq!(call["parameters"]["to"], "a50@example.com");
    assert_eq!(call["parameters_history"].as_array().map(Vec::len), Some(50));
    assert_eq!(statuses(&call).iter().filter(|s| *s == "MODIFIED").count(), 50);
    // The call is still a normal PENDING call: it can be confirmed or cancelled.
    assert_eq!(app.cancel(&id).await?.status, 200);
    Ok(())
}

#[tokio::test]
async fn cancel_while_preparing_stops_before_the_side_effect_and_discards() -> Result<()> {
    let app = app().await?;
    let relay = Relay::start().await?;
    let params = json!({"to": "a@example.com", "delay_ms": {"prepare": 1500}});
    let id = app.create_id(&unique("cancel_exec"), params, Some(&relay.url)).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    // Cancel once the tool is inside prepare (it logs the operation before its delay).
    assert_eq!(operations_reaching(&app, &id, "prepare", 1).await?, 1, "prepare never started");
    let cancelled = app.cancel(&id).await?;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.body["message"], "Okay, I've stopped it before anything was done.");
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "CANCELLED");
    // prepare finishes after the cancel; the executor loses the race and discards its work.
    assert_eq!(operations_reaching(&app, &id, "discard", 1).await?, 1);
    assert_eq!(app.status(&id).await?.body["status"], "CANCELLED");
    assert_eq!(effects(&app, &id).await?, 0);
    Ok(())
}

#[tokio::test]
async fn cancel_at_the_checkpoint_discards_the_prepared_work() -> Result<()> {
    let app = app().await?;
    let relay = Relay::start().await?;
    let id = app.create_id(&unique("cancel_prep"), json!({"to": "a@example.com"}), Some(&relay.url)).await?;
    let confirmed =
        app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=10")]).await?;
    assert_eq!(confirmed.status, 200, "{}", confirmed.body);
    assert_eq!(confirmed.body["status"], "PREPARED");
    assert_eq!(confirmed.headers.get("preference-applied").and_then(|v| v.to_str().ok()), Some("wait=10"));
    let cancelled = app.resume(&id, "cancel").await?;
    assert_eq!(cancelled.status, 200, "{}", cancelled.body);
    assert_eq!(cancelled.body["message"], "Okay, I've cancelled it at the final check. Nothing was done.");
    assert_eq!(relay.wait_for(&id, "completion", SETTLE).await?.body["status"], "CANCELLED");
    assert_eq!(operations(&app, &id, "discard").await?, 1);
    assert_eq!(effects(&app, &id).await?, 0);
    Ok(())
}

#[tokio::test]
async fn cancel_after_the_side_effect_started_is_refused_and_the_call_completes() -> Result<()> {
    let app = app().await?;
    let params = json!({"to": "a@example.com", "checkpoint": false, "delay_ms": {"execute": 1500}});
    let id = app.create_id(&unique("too_late"), params, None).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    for _ in 0..250 {
        if app.status(&id).await?.body["side_effect_started_at"].is_string() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = app.cancel(&id).await?;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.body["code"], "side_effect_started");
    assert_eq!(refused.body["status"], "EXECUTING");
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    assert!(!statuses(&call).contains(&"CANCELLED".to_owned()));
    assert_eq!(effects(&app, &id).await?, 1);
    Ok(())
}

/// 200 confirm/cancel pairs at once: every call ends exactly one way, and the answers say which.
#[tokio::test]
async fn concurrent_confirm_and_cancel_never_both_win() -> Result<()> {
    let app = app().await?;
    let session = unique("race");
    let ids: Vec<String> =
        // A session each, since one session holds only so many waiting calls.
        join_all((0..200).map(|i| {
            let session = format!("{session}-{i}");
            let app = &app;
            async move { app.create_id(&session, json!({"to": "r@example.com", "checkpoint": false}), None).await }
        }))
            .await
            .into_iter()
            .collect::<Result<_>>()?;
    let answers = join_all(ids.iter().map(|id| async {
        let (confirm, cancel) = tokio::join!(app.confirm(id), app.cancel(id));
        (id.clone(), confirm, cancel)
    }))
    .await;
    let mut outcomes = HashMap::new();
    for (id, confirm, cancel) in answers {
        let (confirm, cancel) = (confirm?, cancel?);
        let final_call = app.wait_for_settled(&id).await?;
        let status = final_call["status"].as_str().unwrap_or_default().to_owned();
        let effects = effects(&app, &id).await?;
        match cancel.status {
            200 => ensure!(status == "CANCELLED" && effects == 0, "{id}: cancel won but {status}, {effects} effects"),
            409 => {
                ensure!(confirm.status == 202, "{id}: both lost");
                ensure!(status == "COMPLETED" && effects == 1, "{id}: confirm won but {status}, {effects} effects");
            }
            other => anyhow::bail!("{id}: cancel answered {other}: {}", cancel.body),
        }
        if confirm.status == 409 {
            ensure!(cancel.status == 200, "{id}: confirm lost to nothing");
            ensure!(confirm.body["status"] == "CANCELLED", "{id}: 409 must name the winner: {}", confirm.body);
        }
        *outcomes.entry(status).or_insert(0) += 1;
    }
    assert_eq!(outcomes.values().sum::<i32>(), 200, "{outcomes:?}");
    Ok(())
}

#[tokio::test]
async fn resume_racing_cancel_runs_the_tool_at_most_once() -> Result<()> {
    let app = app().await?;
    let session = unique("resume_race");
    let mut ids = Vec::new();
    for _ in 0..40 {
        let id = app.create_id(&session, json!({"to": "r@example.com"}), None).await?;
        let confirmed =
            app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=10")]).await?;
        ensure!(confirmed.body["status"] == "PREPARED", "{}", confirmed.body);
        ids.push(id);
    }
    let answers = join_all(ids.iter().map(|id| async {
        let (resume, cancel) = tokio::join!(app.resume(id, "proceed"), app.cancel(id));
        (id.clone(), resume, cancel)
    }))
    .await;
    for (id, resume, cancel) in answers {
        let (resume, cancel) = (resume?, cancel?);
        let status = app.wait_for_settled(&id).await?["status"].as_str().unwrap_or_default().to_owned();
        let effects = effects(&app, &id).await?;
        match cancel.status {
            200 => ensure!(status == "CANCELLED" && effects == 0, "{id}: cancel won but {status}/{effects}"),
            409 => ensure!(resume.status == 202 && status == "COMPLETED" && effects == 1, "{id}: {status}/{effects}"),
            other => anyhow::bail!("{id}: cancel answered {other}"),
        }
        ensure!(operations(&app, &id, "execute").await? <= 1, "{id}: executed twice");
    }
    Ok(())
}

/// A crashed attempt is tried again after a back-off that doubles with each attempt, so a tool
/// host that died has time to come back; after the last attempt the call fails at once.
#[tokio::test]
async fn a_trap_in_prepare_is_redriven_by_the_sweeper_until_the_attempts_run_out() -> Result<()> {
    const BACKOFF: f64 = 1.0;
    let scratch = ScratchDatabase::create("trap").await?;
    let backoff = BACKOFF.to_string();
    let options = lifecycle_options(&[("tool_retry_backoff_seconds", &backoff)], &["--sweep-interval", "0.1"]);
    let app = App::start(scratch.serve(options)).await?;
    let session = unique("trap");
    let twice =
        app.create_id(&session, json!({"to": "t@example.com", "trap_in": "prepare", "trap_times": 2}), None).await?;
    let always =
        app.create_id(&session, json!({"to": "t@example.com", "trap_in": "prepare", "trap_times": 3}), None).await?;
    assert_eq!(app.confirm(&twice).await?.status, 202);
    assert_eq!(app.confirm(&always).await?.status, 202);

    // Prepared on its third attempt; the resume is a new drive of the call.
    let prepared = app.wait_for(&twice, "PREPARED", SETTLE).await?;
    assert_eq!(prepared["attempts"], 3);
    assert_eq!(app.resume(&twice, "proceed").await?.status, 202);
    app.wait_for(&twice, "COMPLETED", SETTLE).await?;
    assert_eq!(operations(&app, &twice, "prepare").await?, 3);
    assert_eq!(effects(&app, &twice).await?, 1);

    let failed = app.wait_for(&always, "FAILED", SETTLE).await?;
    let reason = failed["error_message"].as_str().unwrap_or_default();
    assert!(reason.starts_with("gave up after 3 attempts: the tool crashed during prepare"), "{reason}");
    assert_eq!(failed["voice_response"], "Sorry, I couldn't complete that request, and nothing was done.");
    assert_eq!(operations(&app, &always, "prepare").await?, 3);
    assert_eq!(effects(&app, &always).await?, 0);

    // The gaps between the attempts: at least the back-off, then twice it.
    let db = app.db().await?;
    let gaps: Vec<f64> = db
        .query(
            "SELECT extract(epoch FROM created_at - lag(created_at) OVER (ORDER BY created_at))::float8
               FROM fixture_tool_log WHERE tool_call_id = $1 AND operation = 'prepare' ORDER BY created_at",
            &[&always],
        )
        .await?
        .iter()
        .filter_map(|row| row.get::<_, Option<f64>>(0))
        .collect();
    assert_eq!(gaps.len(), 2, "{gaps:?}");
    assert!(gaps[0] >= BACKOFF && gaps[1] >= 2.0 * BACKOFF, "attempts not spaced by the back-off: {gaps:?}");
    let settled: f64 = db
        .query_one(
            "SELECT extract(epoch FROM c.completed_at - max(l.created_at))::float8
               FROM tool_calls c JOIN fixture_tool_log l ON l.tool_call_id = c.tool_call_id
              WHERE c.tool_call_id = $1 GROUP BY c.completed_at",
            &[&always],
        )
        .await?
        .get(0);
    // Had the last attempt waited a back-off too, it would have been 4 × BACKOFF.
    assert!(settled < 2.0 * BACKOFF, "the last attempt's failure waited {settled} s for nothing");
    Ok(())
}

/// A report a worker owed the relay (the checkpoint, the completion) and never sent, because it
/// died between the transition and the callback, is sent by the sweeper once the worker's lease
/// has passed; a report that was delivered is not sent again.
#[tokio::test]
async fn a_report_whose_worker_died_is_sent_by_the_sweeper() -> Result<()> {
    let scratch = ScratchDatabase::create("owed").await?;
    let options = lifecycle_options(&[("execution_lease_seconds", "1")], &["--sweep-interval", "0.2"]);
    let app = App::start(scratch.serve(options)).await?;
    let relay = Relay::start().await?;
    let db = app.db().await?;
    let count = |id: &str, kind: &str| relay.for_call(id).iter().filter(|r| r.kind == kind).count();

    let id = app.create_id(&unique("owed"), json!({"to": "o@example.com"}), Some(&relay.url)).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    // The deliverer clears the stamp once it has recorded the attempt, just after the relay has
    // the callback: a delivered report stops being owed.
    reported(&db, &id).await?;

    die_before_reporting(&db, &id).await?;
    reports_reaching(&relay, &id, "checkpoint", 2).await?;
    let again = relay.for_call(&id).into_iter().filter(|r| r.kind == "checkpoint").nth(1);
    assert!(again.is_some_and(|r| r.signature_valid && r.body["tool_call_id"] == id.as_str()));

    assert_eq!(app.resume(&id, "proceed").await?.status, 202);
    relay.wait_for(&id, "completion", SETTLE).await?;
    reported(&db, &id).await?;
    die_before_reporting(&db, &id).await?;
    reports_reaching(&relay, &id, "completion", 2).await?;
    let completions: Vec<_> = relay.for_call(&id).into_iter().filter(|r| r.kind == "completion").collect();
    assert!(completions.iter().all(|r| r.signature_valid && r.body["status"] == "COMPLETED"));

    // Delivered reports stay delivered: nothing more arrives over several sweeps and leases.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!report_owed(&db, &id).await?);
    assert_eq!((count(&id, "checkpoint"), count(&id, "completion")), (2, 2));
    Ok(())
}

async fn report_owed(db: &tokio_postgres::Client, id: &str) -> Result<bool> {
    let sql = "SELECT report_owed_since IS NOT NULL FROM tool_calls WHERE tool_call_id = $1";
    Ok(db.query_one(sql, &[&id]).await?.get(0))
}

/// Waits until the call no longer owes a report: its deliverer has tried it.
async fn reported(db: &tokio_postgres::Client, id: &str) -> Result<()> {
    let deadline = std::time::Instant::now() + SETTLE;
    while report_owed(db, id).await? {
        ensure!(std::time::Instant::now() < deadline, "{id}: the report delivered is still owed after {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// A worker's death between a transition and its callback, as the database sees it: the
/// transition committed (it owes the report) and no delivery ended.
async fn die_before_reporting(db: &tokio_postgres::Client, id: &str) -> Result<()> {
    db.execute("UPDATE tool_calls SET report_owed_since = now() WHERE tool_call_id = $1", &[&id]).await?;
    Ok(())
}

async fn reports_reaching(relay: &Relay, id: &str, kind: &str, n: usize) -> Result<()> {
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let received = relay.for_call(id).iter().filter(|r| r.kind == kind).count();
        if received >= n {
            return Ok(());
        }
        ensure!(std::time::Instant::now() < deadline, "{id}: {received} {kind} callbacks, not {n}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A crash after the side effect: the re-drive asks the tool, which finds its effect, and the
/// call completes with it instead of doing it again.
#[tokio::test]
async fn a_crash_after_the_side_effect_is_reconciled_not_repeated() -> Result<()> {
    let scratch = ScratchDatabase::create("after_effect").await?;
    let app = isolated_app(&scratch).await?;
    let params = json!({"to": "t@example.com", "checkpoint": false, "trap_in": "after_effect", "trap_times": 1});
    let id = app.create_id(&unique("after_effect"), params, None).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    let call = app.wait_for(&id, "COMPLETED", SETTLE).await?;
    assert_eq!(effects(&app, &id).await?, 1);
    assert_eq!(operations(&app, &id, "execute").await?, 2);
    let db = app.db().await?;
    let effect: i64 =
        db.query_one("SELECT effect_id FROM fixture_tool_effects WHERE tool_call_id = $1", &[&id]).await?.get(0);
    assert_eq!(call["result"]["effect_id"], effect);
    Ok(())
}

#[tokio::test]
async fn a_pending_call_past_its_ttl_is_expired_everywhere() -> Result<()> {
    let app = App::start(lifecycle_options(&[("pending_ttl_seconds", "1")], &["--sweep-interval", "0"])).await?;
    let relay = Relay::start().await?;
    let session = unique("expiry");
    let id = app.create_id(&session, json!({"to": "e@example.com"}), Some(&relay.url)).await?;
    tokio::time::sleep(Duration::from_millis(1300)).await;
    // Read before the sweeper ran: already EXPIRED.
    assert_eq!(app.status(&id).await?.body["status"], "EXPIRED");
    let confirm = app.confirm(&id).await?;
    assert_eq!((confirm.status, confirm.body["code"].as_str()), (410, Some("expired")));
    let modify = app
        .send(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(json!({"parameters": {"to": "b@x.io"}})))
        .await?;
    assert_eq!(modify.status, 410);
    assert_eq!(app.cancel(&id).await?.status, 410);
    let context = app.send(Method::GET, &format!("/voice-tools/context/{session}"), None).await?;
    assert_eq!(context.body["pending"], json!([]));

    let swept = app.sweep().await?;
    assert_eq!(swept.status, 200, "{}", swept.body);
    // Another test's runner may have swept first (one database), so the count is not asserted.
    assert!(swept.body["expired"].is_u64(), "{}", swept.body);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "EXPIRED");
    assert!(completion.signature_valid);
    let call = app.status(&id).await?.body;
    assert_eq!(statuses(&call), ["PENDING", "EXPIRED"]);
    assert_eq!(effects(&app, &id).await?, 0);
    Ok(())
}

/// Each kind of bad input gets its documented status and code, and nothing is written.
#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_written() -> Result<()> {
    let app = app().await?;
    let session = unique("bad");
    let count = || async {
        let db = db().await?;
        anyhow::Ok(
            db.query_one("SELECT count(*) FROM tool_calls WHERE session_id = $1", &[&session]).await?.get::<_, i64>(0),
        )
    };
    let post = |body: Value| app.send(Method::POST, "/voice-tools/pending", Some(body));

    let unknown = post(json!({"session_id": session, "function_name": "launch_rockets", "parameters": {}})).await?;
    assert_eq!((unknown.status, unknown.body["code"].as_str()), (422, Some("unknown_function")));
    let invalid =
        post(json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "not-an-address"}}))
            .await?;
    assert_eq!((invalid.status, invalid.body["code"].as_str()), (422, Some("validation_failed")));
    assert_eq!(invalid.body["fields"], json!([{"field": "to", "problem": "is not an email address"}]));
    let outside = post(json!({"session_id": session, "function_name": "fixture_action",
        "parameters": {"to": "a@b.io"}, "callback_url": "https://evil.example.com/hook"}))
    .await?;
    assert_eq!((outside.status, outside.body["code"].as_str()), (422, Some("callback_not_allowed")));
    let not_object = post(json!({"session_id": session, "function": "fixture_action", "parameters": [1]})).await?;
    assert_eq!((not_object.status, not_object.body["code"].as_str()), (400, Some("invalid_input")));

    let raw = |content_type: &'static str, body: Vec<u8>| {
        app.http
            .post(app.runner.url("/voice-tools/pending"))
            .bearer_auth(gatehouse_tests::TOKEN)
            .header("content-type", content_type)
            .body(body)
            .send()
    };
    let malformed = raw("application/json", b"{\"session_id\": ".to_vec()).await?;
    assert_eq!(malformed.status(), 400);
    assert_eq!(malformed.json::<Value>().await?["code"], "invalid_input");
    let wrong_type = raw("text/plain", b"{}".to_vec()).await?;
    assert_eq!(wrong_type.status(), 415);
    let oversized = raw("application/json", vec![b' '; 70 * 1024]).await?;
    assert_eq!(oversized.status(), 413);
    let no_token = app.http.post(app.runner.url("/voice-tools/pending")).json(&json!({})).send().await?;
    assert_eq!(no_token.status(), 401);
    assert_eq!(count().await?, 0, "a refused create wrote a row");

    let unknown_id = app.confirm("tc_000000000000").await?;
    assert_eq!((unknown_id.status, unknown_id.body["code"].as_str()), (404, Some("not_found")));
    assert_eq!(app.status("not-an-id").await?.status, 404);

    let id = app.create_id(&session, json!({"to": "a@example.com"}), None).await?;
    let before = app.status(&id).await?.body;
    let bad_patch = app
        .send(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(json!({"parameters": {"to": "nope"}})))
        .await?;
    assert_eq!(bad_patch.status, 422);
    assert_eq!(bad_patch.body["fields"][0]["field"], "to");
    let removed = app
        .send(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(json!({"parameters": {"to": null}})))
        .await?;
    assert_eq!(removed.body["fields"], json!([{"field": "to", "problem": "is required"}]));
    let bad_resume = app.resume(&id, "proceed").await?;
    assert_eq!((bad_resume.status, bad_resume.body["status"].as_str()), (409, Some("PENDING")));
    let bad_action = app.resume(&id, "maybe").await?;
    assert_eq!(bad_action.status, 400);
    let bad_callback = app
        .send(Method::POST, &format!("/voice-tools/confirm/{id}"), Some(json!({"callback_url": "http://10.0.0.1/x"})))
        .await?;
    assert_eq!(bad_callback.status, 422);
    assert_eq!(app.status(&id).await?.body, before, "a refused request changed the call");
    assert_eq!(count().await?, 1);
    Ok(())
}

#[tokio::test]
async fn idempotency_key_returns_the_first_answer_and_refuses_a_different_body() -> Result<()> {
    let app = app().await?;
    let session = unique("idem");
    let key = unique("key");
    let body = json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "i@example.com"}});
    let headers = [("idempotency-key", key.as_str())];
    let first = app.send_with(Method::POST, "/voice-tools/pending", Some(body.clone()), &headers).await?;
    assert_eq!(first.status, 201);
    let again = app.send_with(Method::POST, "/voice-tools/pending", Some(body.clone()), &headers).await?;
    assert_eq!((again.status, &again.body), (201, &first.body));
    let mut other = body;
    other["parameters"]["to"] = json!("other@example.com");
    let reused = app.send_with(Method::POST, "/voice-tools/pending", Some(other), &headers).await?;
    assert_eq!((reused.status, reused.body["code"].as_str()), (422, Some("idempotency_key_reused")));
    let db = db().await?;
    let rows: i64 = db.query_one("SELECT count(*) FROM tool_calls WHERE session_id = $1", &[&session]).await?.get(0);
    assert_eq!(rows, 1);
    Ok(())
}

#[tokio::test]
async fn the_registry_and_session_context_routes() -> Result<()> {
    let app = app().await?;
    let tools = app.send(Method::GET, "/voice-tools/tools", None).await?;
    assert_eq!(tools.status, 200);
    let fixture = &tools.body["tools"][0];
    assert_eq!(fixture["name"], "fixture_action");
    assert_eq!(fixture["aliases"], json!(["fixture_alias"]));
    assert_eq!(fixture["needs_checkpoint"], true);
    assert_eq!(fixture["parameters_schema"]["required"], json!(["to"]));
    assert_eq!(fixture["component"], "fixture-tool");

    let session = unique("ctx");
    let db = db().await?;
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value) VALUES ($1, 'last_query_results', $2)",
        &[&session, &json!({"documents": [1, 2]})],
    )
    .await?;
    db.execute(
        "INSERT INTO session_context (session_id, context_key, context_value, expires_at) VALUES ($1, 'old', '{}', now() - interval '1 second')",
        &[&session],
    )
    .await?;
    let path = |key: &str| format!("/get-session-context?session_id={session}&context_key={key}");
    let found = app.send(Method::GET, &path("last_query_results"), None).await?;
    assert_eq!((found.status, &found.body), (200, &json!({"context": {"documents": [1, 2]}})));
    for key in ["old", "missing"] {
        let absent = app.send(Method::GET, &path(key), None).await?;
        assert_eq!((absent.status, absent.body["error"].as_str()), (404, Some("Not found or expired")));
    }
    Ok(())
}

/// Two runners on one database confirm, cancel and sweep the same calls: nothing runs twice
/// and every confirmed call reaches a final state.
#[tokio::test]
async fn two_runners_share_the_work_without_running_anything_twice() -> Result<()> {
    let scratch = ScratchDatabase::create("two_runners").await?;
    let options = scratch.serve(lifecycle_options(&[("execution_lease_seconds", "2")], &["--sweep-interval", "0.2"]));
    let (a, b) = (App::start(options.clone()).await?, App::start(options).await?);
    let session = unique("two");
    let mut ids = Vec::new();
    for i in 0..40 {
        let params = match i % 4 {
            0 => json!({"to": "x@example.com", "checkpoint": false}),
            1 => json!({"to": "x@example.com", "checkpoint": false, "trap_in": "execute"}),
            2 => json!({"to": "x@example.com", "checkpoint": false, "trap_in": "after_effect"}),
            _ => json!({"to": "x@example.com", "checkpoint": false, "delay_ms": {"execute": 200}}),
        };
        ids.push(a.create_id(&session, params, None).await?);
    }
    let work = ids.iter().enumerate().map(|(i, id)| {
        let (mine, theirs) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        async move {
            let (confirm, cancel, _) = tokio::join!(
                mine.confirm(id),
                async { if i % 3 == 0 { Some(theirs.cancel(id).await) } else { None } },
                theirs.sweep()
            );
            (id.clone(), confirm, cancel)
        }
    });
    for (id, confirm, cancel) in join_all(work).await {
        let confirm = confirm?;
        let cancelled = matches!(cancel.transpose()?, Some(answer) if answer.status == 200);
        let status = a.wait_for_settled(&id).await?["status"].as_str().unwrap_or_default().to_owned();
        let effects = effects(&a, &id).await?;
        ensure!(effects <= 1, "{id} ran {effects} times");
        if cancelled {
            ensure!(status == "CANCELLED" && effects == 0, "{id}: cancelled but {status}/{effects}");
        } else {
            ensure!(confirm.status == 202, "{id}: confirm {}", confirm.body);
            ensure!(status == "COMPLETED" && effects == 1, "{id}: {status} with {effects} effects");
        }
    }
    Ok(())
}

/// The relay may answer the progress callback with a cancel: the call stops before prepare.
#[tokio::test]
async fn a_relay_can_cancel_from_the_progress_callback() -> Result<()> {
    let app = app().await?;
    let relay = Relay::start().await?;
    relay.set_progress_reply(ProgressReply::Cancel);
    let id = app.create_id(&unique("progress"), json!({"to": "p@example.com"}), Some(&relay.url)).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    let completion = relay.wait_for(&id, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "CANCELLED");
    let call = app.status(&id).await?.body;
    assert_eq!(call["status_history"][2]["reason"], "the caller changed their mind");
    assert_eq!(operations(&app, &id, "prepare").await?, 0);
    Ok(())
}

/// The test manifest is the application's plus the fixture tool and nothing else: it extends
/// spin.toml and adds only the tool's component, its routes and the registry naming it, so the
/// lifecycle tests run what ships.
#[test]
fn the_test_manifest_is_the_application_plus_the_fixture_tool() -> Result<()> {
    let root = gatehouse_tests::workspace_root();
    let test: toml::Table = std::fs::read_to_string(root.join("tests/fixtures/lifecycle.toml"))?.parse()?;
    assert_eq!(test["extends"].as_str(), Some("../../spin.toml"));
    let components: Vec<&String> = test["component"].as_table().into_iter().flat_map(|t| t.keys()).collect();
    assert_eq!(components, ["fixture-tool"]);
    let variables: Vec<&String> = test["variables"].as_table().into_iter().flat_map(|t| t.keys()).collect();
    assert_eq!(variables, ["tool_registry"]);
    let triggers = test["trigger"]["http"].as_array().cloned().unwrap_or_default();
    assert!(!triggers.is_empty() && triggers.iter().all(|t| t["component"].as_str() == Some("fixture-tool")));
    // The fixture tool is reached as every tool of the application is, with no entry of its
    // own in the other components' allowed_outbound_hosts.
    let app: toml::Table = std::fs::read_to_string(root.join("spin.toml"))?.parse()?;
    let pending = app["component"]["pending"]["allowed_outbound_hosts"].as_array().cloned().unwrap_or_default();
    assert!(pending.contains(&toml::Value::from("{{ tools_origin }}")), "{pending:?}");
    Ok(())
}

/// A relay that fails is retried with backoff, every attempt is recorded, and one that cannot be
/// reached at all never holds up or corrupts the call.
#[tokio::test]
async fn callbacks_are_retried_recorded_and_never_block_the_call() -> Result<()> {
    let app = app().await?;
    let relay = Relay::start().await?;
    let params = json!({"to": "c@example.com", "checkpoint": false});
    let id = app.create_id(&unique("retry"), params.clone(), Some(&relay.url)).await?;
    relay.fail_next(3); // the progress callback (one attempt) and two completion attempts
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    let db = db().await?;
    let mut attempts = Vec::new();
    for _ in 0..300 {
        attempts = db
            .query(
                "SELECT kind, attempt, status_code FROM callback_attempts WHERE tool_call_id = $1 ORDER BY attempt_id",
                &[&id],
            )
            .await?
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1), r.get::<_, Option<i32>>(2)))
            .collect();
        if attempts.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delivered = relay.for_call(&id);
    assert!(delivered.iter().all(|r| r.signature_valid));
    assert_eq!(delivered.iter().filter(|r| r.kind == "completion").count(), 3);
    let expected = [
        ("progress", 1, Some(500)),
        ("completion", 1, Some(500)),
        ("completion", 2, Some(500)),
        ("completion", 3, Some(200)),
    ];
    let expected: Vec<(String, i32, Option<i32>)> = expected.iter().map(|(k, a, s)| ((*k).into(), *a, *s)).collect();
    assert_eq!(attempts, expected);

    // Nobody listens there: every attempt fails, the call completes anyway.
    let unreachable = gatehouse_tests::unreachable_callback_url()?;
    let id = app.create_id(&unique("unreachable"), params, Some(&unreachable)).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    app.wait_for(&id, "COMPLETED", SETTLE).await?;
    for _ in 0..300 {
        let failed: i64 = db
            .query_one("SELECT count(*) FROM callback_attempts WHERE tool_call_id = $1 AND kind = 'completion' AND error IS NOT NULL", &[&id])
            .await?
            .get(0);
        if failed == 4 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    anyhow::bail!("the unreachable relay's four completion attempts were not all recorded")
}

/// Expired calls with no relay to tell (no callback URL, no default) are marked as reported
/// together, one statement for a sweep's batch, and nothing is sent for them; a call with a
/// relay among them still gets its completion, and every one ends owing nothing.
#[tokio::test]
async fn expired_calls_with_no_relay_owe_no_report_and_one_with_a_relay_is_told() -> Result<()> {
    let scratch = ScratchDatabase::create("unaddressed").await?;
    let options = lifecycle_options(&[("pending_ttl_seconds", "1")], &["--sweep-interval", "0.2"]);
    let app = App::start(scratch.serve(options)).await?;
    let relay = Relay::start().await?;
    let db = app.db().await?;
    let session = unique("unaddressed");
    let mut silent = Vec::new();
    for n in 0..5 {
        silent.push(app.create_id(&session, json!({"to": format!("u{n}@example.com")}), None).await?);
    }
    let told = app.create_id(&session, json!({"to": "told@example.com"}), Some(&relay.url)).await?;

    let completion = relay.wait_for(&told, "completion", SETTLE).await?;
    assert_eq!(completion.body["status"], "EXPIRED");
    let all: Vec<&str> = silent.iter().map(String::as_str).chain([told.as_str()]).collect();
    let deadline = std::time::Instant::now() + SETTLE;
    loop {
        let sql = "SELECT count(*) FILTER (WHERE status = 'EXPIRED' AND report_owed_since IS NULL)::int8 \
                     FROM tool_calls WHERE tool_call_id = ANY($1)";
        let settled: i64 = db.query_one(sql, &[&all]).await?.get(0);
        if settled == 6 {
            break;
        }
        ensure!(std::time::Instant::now() < deadline, "{settled} of 6 expired calls owe nothing after {SETTLE:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sql = "SELECT count(*) FROM callback_attempts WHERE tool_call_id = ANY($1)";
    let attempts: i64 = db.query_one(sql, &[&silent]).await?.get(0);
    assert_eq!(attempts, 0, "nothing is sent for a call with no relay");
    assert_eq!(relay.for_call(&told).iter().filter(|r| r.kind == "completion").count(), 1);
    Ok(())
}

/// A call left at the checkpoint expires too: resume is refused, the tool discards its
/// prepared work, and the relay hears EXPIRED. A call at the checkpoint with no relay to tell
/// is discarded just the same: the expiry answers it in full, not as a mere id.
#[tokio::test]
async fn a_call_left_at_the_checkpoint_expires_and_is_discarded() -> Result<()> {
    let app = App::start(lifecycle_options(&[("checkpoint_ttl_seconds", "1")], &["--sweep-interval", "0.2"])).await?;
    let relay = Relay::start().await?;
    let id = app.create_id(&unique("checkpoint_ttl"), json!({"to": "x@example.com"}), Some(&relay.url)).await?;
    let untold = app.create_id(&unique("checkpoint_ttl"), json!({"to": "y@example.com"}), None).await?;
    for id in [&id, &untold] {
        let confirmed =
            app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &[("prefer", "wait=10")]).await?;
        assert_eq!(confirmed.body["status"], "PREPARED");
    }
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let resume = app.resume(&id, "proceed").await?;
    assert_eq!((resume.status, resume.body["code"].as_str()), (410, Some("expired")));
    assert_eq!(relay.wait_for(&id, "completion", SETTLE).await?.body["status"], "EXPIRED");
    for id in [&id, &untold] {
        assert_eq!(operations_reaching(&app, id, "discard", 1).await?, 1, "{id}");
        assert_eq!(operations(&app, id, "execute").await?, 0);
    }
    Ok(())
}

/// `Prefer: wait=N` on status answers as soon as the call leaves EXECUTING.
#[tokio::test]
async fn status_long_polls_until_the_call_moves_on() -> Result<()> {
    let app = app().await?;
    let id = app.create_id(&unique("poll"), json!({"to": "w@example.com", "delay_ms": {"prepare": 600}}), None).await?;
    assert_eq!(app.confirm(&id).await?.status, 202);
    let started = std::time::Instant::now();
    let polled =
        app.send_with(Method::GET, &format!("/voice-tools/status/{id}"), None, &[("prefer", "wait=10")]).await?;
    assert_eq!(polled.body["status"], "PREPARED", "{}", polled.body);
    assert!(started.elapsed() < Duration::from_secs(10));
    // A short wait on a call that stays EXECUTING answers with EXECUTING when it runs out.
    let slow =
        app.create_id(&unique("poll"), json!({"to": "w@example.com", "delay_ms": {"prepare": 3000}}), None).await?;
    assert_eq!(app.confirm(&slow).await?.status, 202);
    let polled =
        app.send_with(Method::GET, &format!("/voice-tools/status/{slow}"), None, &[("prefer", "wait=1")]).await?;
    assert_eq!(polled.body["status"], "EXECUTING");
    assert_eq!(polled.headers.get("preference-applied").and_then(|v| v.to_str().ok()), Some("wait=1"));
    Ok(())
}
