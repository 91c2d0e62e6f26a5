//! Observability end to end (docs/architecture.md, "Observability"): the per-tool execution history
//! and stats after a mixed run, paging through it, and one trace id followed through every
//! component a conversation touches, its callbacks and its log lines.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gatehouse_tests::lifecycle::{App, ProgressReply, Relay, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{TOKEN, unique};
use reqwest::Method;
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(20);
const TOOL: &str = "fixture_action";

/// The history rows are written after each answer; waits until the tool has `expected`.
async fn executions_reaching(db: &tokio_postgres::Client, expected: i64) -> Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let count: i64 = db.query_one("SELECT count(*) FROM tool_executions WHERE tool = $1", &[&TOOL]).await?.get(0);
        if count >= expected || Instant::now() > deadline {
            return Ok(count);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn get(app: &App, path: &str) -> Result<Value> {
    let answer = app.send(Method::GET, path, None).await?;
    if answer.status != 200 {
        bail!("GET {path} answered {}: {}", answer.status, answer.body);
    }
    Ok(answer.body)
}

/// Successes, a correction, a failure, cancels, a rejected input and a crash, then the
/// history and stats must count each exactly.
#[tokio::test]
async fn history_and_stats_count_a_mixed_run_exactly() -> Result<()> {
    let scratch = ScratchDatabase::create("history").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &["--sweep-interval", "0.2"]))).await?;
    let relay = Relay::start().await?;
    let session = unique("mixed");
    let to = |who: &str| json!({"to": format!("{who}@example.com")});

    // Completed, after a correction: validate twice, prepare, execute.
    let completed = app.create_id(&session, to("a"), Some(&relay.url)).await?;
    let patch = json!({"parameters": {"to": "a.smith@example.com"}});
    assert_eq!(app.send(Method::PATCH, &format!("/voice-tools/modify/{completed}"), Some(patch)).await?.status, 200);
    assert_eq!(app.confirm(&completed).await?.status, 202);
    app.wait_for(&completed, "PREPARED", SETTLE).await?;
    assert_eq!(app.resume(&completed, "proceed").await?.status, 202);
    app.wait_for(&completed, "COMPLETED", SETTLE).await?;

    // Cancelled at the checkpoint: validate, prepare, discard.
    let at_checkpoint = app.create_id(&session, to("c"), Some(&relay.url)).await?;
    assert_eq!(app.confirm(&at_checkpoint).await?.status, 202);
    app.wait_for(&at_checkpoint, "PREPARED", SETTLE).await?;
    assert_eq!(app.cancel(&at_checkpoint).await?.status, 200);

    // Cancelled by the relay before prepare ran: validate, and prepare cancelled.
    relay.set_progress_reply(ProgressReply::Cancel);
    let by_relay = app.create_id(&session, to("d"), Some(&relay.url)).await?;
    assert_eq!(app.confirm(&by_relay).await?.status, 202);
    app.wait_for(&by_relay, "CANCELLED", SETTLE).await?;
    relay.set_progress_reply(ProgressReply::Continue);

    // Refused input: one rejected validate, and no call.
    let refused = app.create(&session, json!({"to": "not-an-address"}), None).await?;
    assert_eq!(refused.status, 422, "{}", refused.body);

    // A crash in prepare, re-driven: validate, prepare crashed, prepare, execute.
    let crashed = app.create_id(&session, json!({"to": "f@example.com", "trap_in": "prepare"}), None).await?;
    assert_eq!(app.confirm(&crashed).await?.status, 202);
    app.wait_for(&crashed, "PREPARED", SETTLE).await?;
    assert_eq!(app.resume(&crashed, "proceed").await?.status, 202);
    app.wait_for(&crashed, "COMPLETED", SETTLE).await?;

    // A failure, last, so it is the last error: validate, prepare, execute failed, and the
    // discard that releases what prepare left (a definite failure keeps no hold).
    let failed = app.create_id(&session, json!({"to": "b@example.com", "fail_in": "execute"}), None).await?;
    assert_eq!(app.confirm(&failed).await?.status, 202);
    app.wait_for(&failed, "PREPARED", SETTLE).await?;
    assert_eq!(app.resume(&failed, "proceed").await?.status, 202);
    app.wait_for(&failed, "FAILED", SETTLE).await?;

    let db = scratch.connect().await?;
    assert_eq!(executions_reaching(&db, 18).await?, 18);

    let stats = get(&app, "/voice-tools/tools/fixture_action/stats?window=1h").await?;
    assert_eq!(stats["tool"], TOOL);
    assert_eq!(stats["window"], "1h");
    assert_eq!(stats["executions"], 18, "{stats}");
    assert_eq!(
        stats["outcomes"],
        json!({"ok": 14, "rejected": 1, "failed": 1, "crashed": 1, "cancelled": 1}),
        "{stats}"
    );
    // 14 successes of the 16 executions that ran to an outcome of their own.
    assert_eq!(stats["success_rate"].as_f64(), Some(0.875), "{stats}");
    let operations = &stats["by_operation"];
    let counts = |op: &str| (operations[op]["executions"].as_i64(), operations[op]["ok"].as_i64());
    assert_eq!(counts("validate"), (Some(7), Some(6)), "{stats}");
    assert_eq!(counts("prepare"), (Some(6), Some(4)), "{stats}");
    assert_eq!(counts("execute"), (Some(3), Some(2)), "{stats}");
    assert_eq!(counts("discard"), (Some(2), Some(2)), "{stats}");
    let (p50, p95) = (stats["p50_ms"].as_f64().unwrap_or(-1.0), stats["p95_ms"].as_f64().unwrap_or(-1.0));
    assert!(p50 >= 0.0 && p95 >= p50, "{stats}");
    let exact: (f64, f64) = {
        let row = db
            .query_one(
                "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3)::float8,
                        round(percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms)::numeric, 3)::float8
                   FROM tool_executions WHERE tool = $1",
                &[&TOOL],
            )
            .await?;
        (row.get(0), row.get(1))
    };
    assert_eq!((p50, p95), exact);
    assert_eq!(stats["last_error"]["error"], "The fixture was told to fail in execute.", "{stats}");
    assert_eq!(stats["last_error"]["operation"], "execute");
    assert_eq!(stats["last_error"]["tool_call_id"], failed.as_str());
    assert!(stats["last_error"]["at"].is_string());

    // Every row names the tool's component and its crate version, even the ones the lifecycle
    // wrote on its behalf; each row of a call carries the call's trace.
    let rows = db
        .query(
            "SELECT e.component, e.component_version, e.outcome, e.operation, e.trace_id = c.trace_id
               FROM tool_executions e LEFT JOIN tool_calls c USING (tool_call_id) WHERE e.tool = $1",
            &[&TOOL],
        )
        .await?;
    for row in &rows {
        let (component, version): (String, String) = (row.get(0), row.get(1));
        assert_eq!((component.as_str(), version.as_str()), ("fixture-tool", env!("CARGO_PKG_VERSION")));
        let same_trace: Option<bool> = row.get(4);
        assert_ne!(same_trace, Some(false), "a row's trace differs from its call's");
    }
    let outcome_of = |operation: &str, outcome: &str| {
        rows.iter().filter(|r| r.get::<_, String>(3) == operation && r.get::<_, String>(2) == outcome).count()
    };
    assert_eq!(outcome_of("prepare", "crashed"), 1);
    assert_eq!(outcome_of("prepare", "cancelled"), 1);

    // The alias names the same history; the filters narrow it.
    let by_alias = get(&app, "/voice-tools/tools/fixture_alias/stats?window=1h").await?;
    assert_eq!(by_alias["executions"], 18);
    let oks = get(&app, "/voice-tools/tools/fixture_action/executions?outcome=ok&limit=200").await?;
    assert_eq!(oks["executions"].as_array().map(Vec::len), Some(14));
    assert!(oks["next_cursor"].is_null());
    let future = get(&app, "/voice-tools/tools/fixture_action/executions?since=2999-01-01T00:00:00Z").await?;
    assert_eq!(future["executions"], json!([]));
    let failures = get(&app, "/voice-tools/tools/fixture_action/executions?outcome=failed").await?;
    assert_eq!(failures["executions"][0]["tool_call_id"], failed.as_str());
    assert_eq!(failures["executions"][0]["error"], "The fixture was told to fail in execute.");
    Ok(())
}

/// Paging through a tool's executions with a small page returns every row exactly once, newest
/// first, even while new rows keep arriving at the head.
#[tokio::test]
async fn paging_returns_every_execution_exactly_once() -> Result<()> {
    let scratch = ScratchDatabase::create("paging").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &[]))).await?;
    let session = unique("paging");
    for n in 0..11 {
        app.create_id(&session, json!({"to": format!("p{n}@example.com")}), None).await?;
    }
    let db = scratch.connect().await?;
    assert_eq!(executions_reaching(&db, 11).await?, 11);
    let expected: Vec<i64> = db
        .query("SELECT execution_id FROM tool_executions ORDER BY started_at DESC, execution_id DESC", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();

    let mut seen = Vec::new();
    let mut path = "/voice-tools/tools/fixture_action/executions?limit=4".to_owned();
    for page in 0.. {
        let body = get(&app, &path).await?;
        let rows = body["executions"].as_array().context("no executions")?;
        assert!(rows.len() <= 4);
        seen.extend(rows.iter().filter_map(|row| row["execution_id"].as_i64()));
        if page == 0 {
            // A row that arrives after the first page is newer than the cursor: it does not
            // shift the pages that follow.
            app.create_id(&session, json!({"to": "late@example.com"}), None).await?;
        }
        match body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/voice-tools/tools/fixture_action/executions?limit=4&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen, expected, "every row once, newest first");
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 11);
    Ok(())
}

/// Bad query parameters are a 400 naming the parameter; an unknown tool is a 404.
#[tokio::test]
async fn history_routes_refuse_bad_parameters() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    for (query, field) in [
        ("executions?limit=0", "limit"),
        ("executions?limit=201", "limit"),
        ("executions?limit=ten", "limit"),
        ("executions?outcome=great", "outcome"),
        ("executions?since=yesterday", "since"),
        ("executions?since=2026-02-30T00:00:00Z", "since"),
        ("executions?cursor=abc", "cursor"),
        ("stats?window=1w", "window"),
        ("stats?window=0h", "window"),
    ] {
        let answer = app.send(Method::GET, &format!("/voice-tools/tools/fixture_action/{query}"), None).await?;
        assert_eq!(answer.status, 400, "{query}: {}", answer.body);
        assert_eq!(answer.body["code"], "invalid_input", "{query}");
        assert_eq!(answer.body["fields"][0]["field"], field, "{query}");
    }
    for path in ["/voice-tools/tools/no_such_tool/stats", "/voice-tools/tools/no_such_tool/executions"] {
        let answer = app.send(Method::GET, path, None).await?;
        assert_eq!(answer.status, 404, "{path}");
        assert_eq!(answer.body["code"], "not_found");
    }
    let unauthenticated = reqwest::get(app.runner.url("/voice-tools/tools/fixture_action/stats")).await?;
    assert_eq!(unauthenticated.status(), 401);
    Ok(())
}

/// The relay's trace id reaches the call, every callback, every history row, and the log lines
/// of every component the conversation went through; the logs hold no secret and no message.
#[tokio::test]
async fn one_trace_id_follows_the_conversation() -> Result<()> {
    let app = App::start(lifecycle_options(&[], &[])).await?;
    let relay = Relay::start().await?;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let traceparent = format!("00-{trace}-00f067aa0ba902b7-01");
    let headers = [("traceparent", traceparent.as_str())];
    let subject = unique("Quarterly numbers for Dana");

    let body = json!({"session_id": unique("trace"), "function_name": TOOL, "callback_url": relay.url,
                      "parameters": {"to": "dana@example.com", "subject": subject}});
    let created = app.send_with(Method::POST, "/voice-tools/pending", Some(body), &headers).await?;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["tool_call_id"].as_str().context("no id")?.to_owned();
    let patch = json!({"parameters": {"to": "dana.lee@example.com"}});
    let modified = app.send_with(Method::PATCH, &format!("/voice-tools/modify/{id}"), Some(patch), &headers).await?;
    assert_eq!(modified.status, 200);
    let confirmed = app.send_with(Method::POST, &format!("/voice-tools/confirm/{id}"), None, &headers).await?;
    assert_eq!(confirmed.status, 202);
    relay.wait_for(&id, "checkpoint", SETTLE).await?;
    let proceed = Some(json!({"action": "proceed"}));
    let resumed = app.send_with(Method::POST, &format!("/resume-execution/{id}"), proceed, &headers).await?;
    assert_eq!(resumed.status, 202);
    relay.wait_for(&id, "completion", SETTLE).await?;

    let call = app.status(&id).await?.body;
    assert_eq!(call["trace_id"], trace);
    let callbacks = relay.for_call(&id);
    assert!(callbacks.len() >= 3, "{callbacks:?}");
    for callback in &callbacks {
        assert_eq!(callback.body["trace_id"], trace, "{} callback", callback.kind);
        let header = callback.traceparent.as_deref().unwrap_or_default();
        assert!(header.starts_with(&format!("00-{trace}-")), "{} callback traceparent {header}", callback.kind);
    }
    let db = gatehouse_tests::db().await?;
    let rows = db
        .query(
            "SELECT operation, trace_id FROM tool_executions WHERE tool_call_id = $1 ORDER BY started_at, execution_id",
            &[&id],
        )
        .await?;
    let rows: Vec<(String, Option<String>)> = rows.iter().map(|row| (row.get(0), row.get(1))).collect();
    let in_trace = |operation: &str| (operation.to_owned(), Some(trace.to_owned()));
    assert_eq!(rows, [in_trace("validate"), in_trace("prepare"), in_trace("execute")], "the correction, then the run");

    // Every component the conversation went through logged its request in the trace.
    let components = ["pending", "fixture-tool", "modify", "confirm", "async-executor", "resume"];
    let deadline = Instant::now() + Duration::from_secs(5);
    let lines = loop {
        let lines: Vec<Value> = app.runner.logs().iter().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let traced = |component: &str| {
            lines.iter().any(|l| l["component"] == component && l["trace_id"] == trace && l["msg"] == "request")
        };
        if components.iter().all(|c| traced(c)) || Instant::now() > deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    for component in components {
        let line = lines
            .iter()
            .find(|l| l["component"] == component && l["trace_id"] == trace && l["msg"] == "request")
            .with_context(|| format!("no request line from {component} in trace {trace}"))?;
        for field in ["route", "method", "status", "duration_ms", "span_id", "ts", "level"] {
            assert!(!line[field].is_null(), "{component}'s line has no {field}: {line}");
        }
    }
    let pending = lines.iter().find(|l| l["component"] == "pending" && l["trace_id"] == trace).context("pending")?;
    assert_eq!(pending["route"], "/voice-tools/pending");
    assert_eq!(pending["status"], 201);
    assert_eq!(pending["parent_span_id"], "00f067aa0ba902b7");

    let all = app.runner.logs().join("\n");
    for secret in [TOKEN, gatehouse_tests::lifecycle::CALLBACK_SECRET, subject.as_str(), "dana.lee@example.com"] {
        assert!(!all.contains(secret), "the log holds {secret:?}");
    }
    Ok(())
}

/// An accepted `validate` hands its row to the create, which writes it in the statement that
/// records the call: the row is there when the create answers, named after the tool's
/// component and version, once for each time the tool validated (an idempotent retry
/// validates again), and a refused input is still recorded, by the tool.
#[tokio::test]
async fn a_creates_validate_row_is_written_with_the_call() -> Result<()> {
    let scratch = ScratchDatabase::create("validate_row").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &[]))).await?;
    let db = scratch.connect().await?;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let traceparent = format!("00-{trace}-b7ad6b7169203331-01");
    let body = json!({"session_id": unique("validate-row"), "function_name": TOOL,
                      "parameters": {"to": "dana@example.com"}});
    let headers = [("traceparent", traceparent.as_str()), ("idempotency-key", "validate-row-1")];
    let rows = || async {
        let rows = db
            .query(
                "SELECT component, component_version, outcome, tool_call_id FROM tool_executions \
                  WHERE operation = 'validate' AND trace_id = $1",
                &[&trace],
            )
            .await?;
        anyhow::Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect::<Vec<_>>())
    };

    let created = app.send_with(Method::POST, "/voice-tools/pending", Some(body.clone()), &headers).await?;
    assert_eq!(created.status, 201, "{}", created.body);
    let written: Vec<(String, String, String, Option<String>)> = rows().await?;
    assert_eq!(written.len(), 1, "{written:?}");
    let (component, version, outcome, call) = &written[0];
    assert_eq!((component.as_str(), outcome.as_str(), call), ("fixture-tool", "ok", &None));
    assert!(!version.is_empty() && version != "unknown", "the tool's own version: {version}");

    let again = app.send_with(Method::POST, "/voice-tools/pending", Some(body), &headers).await?;
    assert_eq!((again.status, &again.body), (201, &created.body), "the retry answers the first call");
    assert_eq!(rows().await?.len(), 2, "the retry validated again");

    let refused = json!({"session_id": unique("validate-row"), "function_name": TOOL, "parameters": {"to": "nobody"}});
    let answer =
        app.send_with(Method::POST, "/voice-tools/pending", Some(refused), &[("traceparent", &traceparent)]).await?;
    assert_eq!(answer.status, 422, "{}", answer.body);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !rows().await?.iter().any(|(_, _, outcome, _)| outcome == "rejected") {
        assert!(Instant::now() < deadline, "no rejected validate row: {:?}", rows().await?);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    Ok(())
}

/// History rows (and the other writes migration V12 lists) commit without waiting for the
/// disk, through `asynchronous_commit()`: the setting must hold for that statement's own
/// transaction and nothing after it, since the runner and Spin hand the connection to the next
/// request.
#[tokio::test]
async fn asynchronous_commit_leaves_nothing_on_the_connection() -> Result<()> {
    let scratch = ScratchDatabase::create("async_commit").await?;
    let db = scratch.connect().await?;
    let setting = |row: tokio_postgres::Row| row.get::<_, String>(0);
    assert_eq!(setting(db.query_one("SHOW synchronous_commit", &[]).await?), "on");
    let within: String = db
        .query_one("SELECT current_setting('synchronous_commit') FROM (SELECT 1) one WHERE asynchronous_commit()", &[])
        .await?
        .get(0);
    assert_eq!(within, "off", "the statement that asks for it commits asynchronously");
    assert_eq!(setting(db.query_one("SHOW synchronous_commit", &[]).await?), "on", "and only that statement");

    // The statement that writes a history row, as the contract server sends it.
    db.execute(
        include_str!("../../crates/store/src/sql/history/record.sql"),
        &[
            &TOOL,
            &"fixture-tool",
            &Some("1.0.0"),
            &"validate",
            &None::<String>,
            &1_700_000_000.0_f64,
            &0.5_f64,
            &"ok",
            &None::<String>,
            &None::<String>,
            // the tenant: none given, and no call, so the first tenant's
            &None::<String>,
        ],
    )
    .await?;
    assert_eq!(executions_reaching(&db, 1).await?, 1);
    assert_eq!(setting(db.query_one("SHOW synchronous_commit", &[]).await?), "on");
    Ok(())
}

/// Executions in the window beyond what the stats route sorts itself (10,000): written by six
/// connections at once, a statement of 250 at a time, into the last fifty minutes and three
/// hours ago.
const ROLLED_EXECUTIONS_PER_WRITER: i64 = 2_500;
const ROLLED_WRITERS: i64 = 6;

/// The stats of a window with more executions than the route sorts come from the rollups
/// (docs/architecture.md, "Tool stats at scale"): before the sweeper has added the executions
/// six connections wrote at once, and after, the counts are the executions' own, exactly, and
/// the percentiles are read from the bins, within their 4% of the exact ones.
#[tokio::test]
async fn stats_beyond_what_the_route_sorts_come_from_rollups_that_count_exactly() -> Result<()> {
    let scratch = ScratchDatabase::create("rollups").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &["--sweep-interval", "0"]))).await?;
    let mut writers = Vec::new();
    for writer in 0..ROLLED_WRITERS {
        let db = scratch.connect().await?;
        writers.push(tokio::spawn(async move {
            for statement in 0..ROLLED_EXECUTIONS_PER_WRITER / 250 {
                let first = (writer * ROLLED_EXECUTIONS_PER_WRITER + statement * 250) as i32;
                db.execute(
                    "INSERT INTO tool_executions (tool, component, component_version, operation, started_at,
                                                  duration_ms, outcome)
                     SELECT $1, 'fixture-tool', 'test', (ARRAY['validate', 'prepare', 'execute'])[1 + g % 3],
                            now() - CASE WHEN g % 10 = 0 THEN interval '3 hours' ELSE interval '0' END
                                  - make_interval(secs => (g * 7919) % 3000),
                            0.3 + ((g * 104729) % 5000) / 10.0,
                            (ARRAY['ok', 'ok', 'ok', 'ok', 'ok', 'ok', 'rejected', 'failed', 'crashed', 'cancelled'])[1 + (g / 3) % 10]
                       FROM generate_series($2::int, $2::int + 249) AS g",
                    &[&TOOL, &first],
                )
                .await?;
            }
            anyhow::Ok(())
        }));
    }
    for writer in writers {
        writer.await??;
    }
    let db = scratch.connect().await?;
    let waiting: i64 = db.query_one("SELECT count(*) FROM tool_execution_inbox", &[]).await?.get(0);
    assert_eq!(waiting, ROLLED_WRITERS * ROLLED_EXECUTIONS_PER_WRITER, "every execution waits in the inbox");

    let expected = exact_stats(&db).await?;
    assert!(expected["executions"].as_i64().unwrap_or(0) > 10_000, "{expected}");
    let stats = get(&app, &format!("/voice-tools/tools/{TOOL}/stats?window=1h")).await?;
    assert_stats_match(&stats, &expected);
    assert_read_from_bins(&db, &stats).await?;

    // One pass of the sweeper adds the inbox to the rollups, statement after statement of
    // 10,000 while they come back full (here two).
    assert_eq!(app.sweep().await?.status, 200);
    let waiting = "SELECT count(*) FROM tool_execution_inbox";
    assert_eq!(db.query_one(waiting, &[]).await?.get::<_, i64>(0), 0, "executions left in the inbox after a pass");
    // Each period's rollups count every execution once.
    let counted = db
        .query(
            "SELECT period, sum(executions)::int8, (SELECT count(*) FROM tool_executions WHERE tool = $1)
               FROM tool_execution_rollups WHERE tool = $1 GROUP BY period ORDER BY period",
            &[&TOOL],
        )
        .await?;
    assert_eq!(counted.len(), 2);
    for row in &counted {
        let (period, rolled, recorded): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        assert_eq!(rolled, recorded, "the {period} rollups against the executions");
    }
    let after = get(&app, &format!("/voice-tools/tools/{TOOL}/stats?window=1h")).await?;
    assert_stats_match(&after, &exact_stats(&db).await?);
    assert_read_from_bins(&db, &after).await
}

/// The stats' p50 is the middle of a duration bin, as read from the rollups, not an exact
/// percentile.
async fn assert_read_from_bins(db: &tokio_postgres::Client, stats: &Value) -> Result<()> {
    let p50 = stats["p50_ms"].as_f64().unwrap_or(-1.0);
    let middle: f64 =
        db.query_one("SELECT round(duration_bin_ms(duration_bin($1))::numeric, 3)::float8", &[&p50]).await?.get(0);
    assert_eq!(p50, middle, "the p50 was not read from the rollups: {stats}");
    Ok(())
}

/// The last hour's figures computed from the executions themselves.
async fn exact_stats(db: &tokio_postgres::Client) -> Result<Value> {
    let row = db
        .query_one(
            "WITH w AS (SELECT * FROM tool_executions WHERE tool = $1 AND started_at >= now() - interval '1 hour')
             SELECT jsonb_build_object(
                 'executions', (SELECT count(*) FROM w),
                 'outcomes', (SELECT jsonb_object_agg(o, (SELECT count(*) FROM w WHERE outcome = o))
                                FROM unnest(ARRAY['ok', 'rejected', 'failed', 'crashed', 'cancelled']) AS o),
                 'p50_ms', (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FROM w),
                 'p95_ms', (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM w),
                 'by_operation', (SELECT jsonb_object_agg(operation, jsonb_build_object(
                                             'executions', n, 'ok', ok, 'p50_ms', p50, 'p95_ms', p95))
                                    FROM (SELECT operation, count(*) AS n, count(*) FILTER (WHERE outcome = 'ok') AS ok,
                                                 percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
                                                 percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95
                                            FROM w GROUP BY operation) AS o))",
            &[&TOOL],
        )
        .await?;
    Ok(row.get(0))
}

/// Counts equal; each percentile within the bins' width (8%, so 4% either side of the middle)
/// and the rounding; the timeline adds up to the total.
fn assert_stats_match(stats: &Value, expected: &Value) {
    assert_eq!(stats["executions"], expected["executions"], "{stats}");
    assert_eq!(stats["outcomes"], expected["outcomes"], "{stats}");
    let close = |got: &Value, exact: &Value, what: &str| {
        let (got, exact) = (got.as_f64().unwrap_or(-1.0), exact.as_f64().unwrap_or(-2.0));
        assert!((got - exact).abs() <= exact * 0.041 + 0.001, "{what}: {got} against the exact {exact}\n{stats}");
    };
    close(&stats["p50_ms"], &expected["p50_ms"], "p50");
    close(&stats["p95_ms"], &expected["p95_ms"], "p95");
    for (operation, figures) in expected["by_operation"].as_object().into_iter().flatten() {
        let got = &stats["by_operation"][operation];
        assert_eq!(got["executions"], figures["executions"], "{operation}: {stats}");
        assert_eq!(got["ok"], figures["ok"], "{operation}: {stats}");
        close(&got["p50_ms"], &figures["p50_ms"], &format!("{operation} p50"));
        close(&got["p95_ms"], &figures["p95_ms"], &format!("{operation} p95"));
    }
    let timeline: i64 =
        stats["timeline"].as_array().into_iter().flatten().filter_map(|b| b["executions"].as_i64()).sum();
    assert_eq!(Some(timeline), stats["executions"].as_i64(), "{stats}");
}
