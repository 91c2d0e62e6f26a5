//! An upgrade while the release before keeps serving (docs/deploying.md, "Upgrading"): the
//! migrations from the last release before tenants (V17) to this one run on a populated database
//! while that release's statements go on, and none of them fails; the contract step waits for
//! `--contract`, this release serves before and after it, and the schema it ends with is the
//! one a new database gets.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{App, ScratchDatabase, ensure_fixture_tables, lifecycle_options};
use gatehouse_tests::unique;
use reqwest::Method;
use serde_json::json;

/// The last migration of the release before tenants.
const PREVIOUS_RELEASE: i32 = 17;

/// What that release sent that a schema change can break: the conflict targets of its upserts
/// (a call's idempotency key per session, a session's context key, a document's id), the
/// functions it called, and the tables it read and wrote, in its own statements' shapes.
const PREVIOUS_CREATE: &str = "
    INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, idempotency_key,
                            status, status_history, expires_at)
    VALUES ($1, $2, 'fixture_action', 'fixture-tool', '{}'::jsonb, $3, 'PENDING',
            jsonb_build_array(status_entry('PENDING', NULL, 'relay')), now() + interval '60 seconds')
    ON CONFLICT (session_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING";
const PREVIOUS_READ: &str = "SELECT tool_call_json(c) FROM tool_calls c WHERE c.tool_call_id = $1";
const PREVIOUS_SESSION_LIST: &str =
    "SELECT tool_call_id FROM tool_calls WHERE session_id = $1 ORDER BY created_at DESC LIMIT 20";
const PREVIOUS_CONTEXT: &str = "
    INSERT INTO session_context (session_id, context_key, context_value, created_at, expires_at)
    SELECT $1, 'topic', '{\"a\": 1}'::jsonb, now(), now() + interval '1 hour' WHERE asynchronous_commit()
    ON CONFLICT (session_id, context_key) DO UPDATE
       SET context_value = EXCLUDED.context_value, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at";
const PREVIOUS_DOCUMENT: &str = "
    INSERT INTO documents AS d (id, content, metadata, embedding, content_hash)
    VALUES ($1, 'a note', '{}'::jsonb, $2::text::vector, $3)
    ON CONFLICT (id) DO UPDATE SET content_hash = EXCLUDED.content_hash, updated_at = now()";
const PREVIOUS_EXECUTION: &str = "
    INSERT INTO tool_executions (tool, component, component_version, operation, started_at, duration_ms, outcome)
    VALUES ('fixture-tool', 'fixture-tool', '1', 'execute', now(), 1.5, 'ok')";
const PREVIOUS_HISTORY: &str = "
    SELECT execution_id FROM tool_executions WHERE tool = 'fixture-tool' ORDER BY started_at DESC LIMIT 20";

/// How many calls the database holds when the upgrade starts: enough that an index built under
/// a lock, or a table rewritten, would hold the previous release's statements up visibly; and
/// half as many executions. `GATEHOUSE_UPGRADE_CALLS` measures another size
/// (docs/benchmarks.md records the run at a million).
fn calls() -> i64 {
    std::env::var("GATEHOUSE_UPGRADE_CALLS").ok().and_then(|calls| calls.parse().ok()).unwrap_or(200_000)
}

/// The previous release's statements, side by side, for as long as `running` holds: each loop
/// is one connection of that release. Answers how many statements ran and the longest one.
async fn previous_release(url: String, running: Arc<AtomicBool>) -> Result<(u64, Duration)> {
    let embedding = format!("[{}]", vec!["0.05"; 384].join(","));
    let mut loops = Vec::new();
    for worker in 0..4_u32 {
        let db = gatehouse_tests::connect(&url).await?;
        let running = running.clone();
        let embedding = embedding.clone();
        loops.push(tokio::spawn(async move {
            let (mut statements, mut longest, mut n) = (0_u64, Duration::ZERO, 0_u64);
            while running.load(Ordering::SeqCst) {
                n += 1;
                let started = Instant::now();
                match worker {
                    0 => {
                        let id = format!("tc_f{:011x}", 2 * n);
                        let session = format!("prev-session-{}", n % 50);
                        db.execute(PREVIOUS_CREATE, &[&id, &session, &format!("key-{n}")])
                            .await
                            .with_context(|| format!("create {id}"))?;
                        // The same key again finds the first call.
                        db.execute(
                            PREVIOUS_CREATE,
                            &[&format!("tc_f{:011x}", 2 * n + 1), &session, &format!("key-{n}")],
                        )
                        .await
                        .context("create again")?;
                        db.query_one(PREVIOUS_READ, &[&id]).await.context("status read")?;
                    }
                    1 => {
                        db.execute(PREVIOUS_CONTEXT, &[&format!("prev-session-{}", n % 50)])
                            .await
                            .context("context")?;
                        db.query(PREVIOUS_SESSION_LIST, &[&format!("seed-{}", n % 1000)]).await.context("list")?;
                    }
                    2 => {
                        db.execute(PREVIOUS_DOCUMENT, &[&format!("doc-{}", n % 20), &embedding, &format!("h{n}")])
                            .await
                            .context("document")?;
                    }
                    _ => {
                        db.execute(PREVIOUS_EXECUTION, &[]).await.context("execution")?;
                        db.query(PREVIOUS_HISTORY, &[]).await.context("history")?;
                    }
                }
                longest = longest.max(started.elapsed());
                statements += 1;
            }
            anyhow::Ok((statements, longest))
        }));
    }
    let (mut statements, mut longest) = (0, Duration::ZERO);
    for (worker, run) in loops.into_iter().enumerate() {
        let (ran, slowest) = run.await?.with_context(|| format!("the previous release's connection {worker}"))?;
        ensure!(ran > 0, "the previous release's connection {worker} ran nothing while the migration ran");
        statements += ran;
        longest = longest.max(slowest);
    }
    Ok((statements, longest))
}

/// `gatehouse migrate`, with `--contract` when asked: what it printed.
fn migrate(url: &str, contract: bool) -> Result<String> {
    let out = gatehouse_tests::migrate(url, if contract { &["--contract"] } else { &[] })?;
    ensure!(out.status.success(), "migrate: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The indexes and constraints of the tables the migrations changed, as the catalogue has them.
async fn schema(scratch: &ScratchDatabase) -> Result<Vec<String>> {
    let db = scratch.connect().await?;
    let rows = db
        .query(
            "SELECT format('index %s: %s', indexname, indexdef) FROM pg_indexes
              WHERE schemaname = 'public'
                AND tablename IN ('tool_calls', 'tool_executions', 'callback_attempts', 'session_context', 'documents')
             UNION ALL
             SELECT format('constraint %s on %s: %s', conname, conrelid::regclass, pg_get_constraintdef(oid))
               FROM pg_constraint
              WHERE conrelid::regclass::text IN
                    ('tool_calls', 'tool_executions', 'callback_attempts', 'session_context', 'documents')
             ORDER BY 1",
            &[],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// The upgrade from the release before tenants, on 200,000 calls and 100,000 executions, while
/// four connections of that release create calls (twice with each idempotency key), read them,
/// list a session's, upsert session context and documents, and write and read a tool's
/// history: not one of their statements fails. Before V18 was made add-only, every create and
/// context upsert of that release failed from V18 on.
#[tokio::test]
async fn the_release_before_tenants_keeps_serving_while_the_upgrade_runs() -> Result<()> {
    let scratch = ScratchDatabase::migrated_to("upgrade-live", Some(PREVIOUS_RELEASE)).await?;
    let db = scratch.connect().await?;
    db.execute(
        "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status, created_at,
                                 expires_at)
         SELECT 'tc_' || lpad(to_hex(n), 12, '0'), 'seed-' || (n % 1000), 'fixture_action', 'fixture-tool', '{}'::jsonb, 'COMPLETED',
                now() - make_interval(secs => n), now() - make_interval(secs => n) + interval '60 seconds'
           FROM generate_series(1, $1::int8) AS n",
        &[&calls()],
    )
    .await?;
    db.execute(
        "INSERT INTO tool_executions (tool, component, component_version, operation, started_at, duration_ms, outcome)
         SELECT 'fixture-tool', 'fixture-tool', '1', 'execute', now() - make_interval(secs => n), 1.0, 'ok'
           FROM generate_series(1, $1::int8) AS n",
        &[&(calls() / 2)],
    )
    .await?;
    db.batch_execute("ANALYZE").await?;

    let running = Arc::new(AtomicBool::new(true));
    let serving = tokio::spawn(previous_release(scratch.url.clone(), running.clone()));
    let started = Instant::now();
    let upgrade = {
        let url = scratch.url.clone();
        tokio::task::spawn_blocking(move || migrate(&url, false)).await?
    };
    let took = started.elapsed();
    running.store(false, Ordering::SeqCst);
    let (statements, longest) = serving.await??;
    let upgrade = upgrade?;
    eprintln!(
        "upgrade from V{PREVIOUS_RELEASE}: {took:.1?}; the previous release ran {statements} statements beside \
         it, the longest took {longest:.0?}"
    );
    ensure!(upgrade.contains("applied V31__"), "{upgrade}");
    ensure!(upgrade.contains("left for `gatehouse migrate --contract`"), "the contract step must wait: {upgrade}");

    // This release serves the database before its contract step: a create with an idempotency
    // key, the same key again, and session context.
    ensure_fixture_tables(&db).await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &["--sweep-interval", "0"]))).await?;
    let session = unique("upgraded");
    let key = unique("key");
    let body = json!({"session_id": session, "function_name": "fixture_action", "parameters": {"to": "a@example.com"}});
    let first =
        app.send_with(Method::POST, "/voice-tools/pending", Some(body.clone()), &[("Idempotency-Key", &key)]).await?;
    let again = app.send_with(Method::POST, "/voice-tools/pending", Some(body), &[("Idempotency-Key", &key)]).await?;
    ensure!(
        first.status == 201 && again.status == 201,
        "{} {}: {} {}",
        first.status,
        again.status,
        first.body,
        again.body
    );
    ensure!(first.body["tool_call_id"] == again.body["tool_call_id"], "the key's second create found the first call");
    drop(app);

    // Once the previous release is gone, the contract step removes what it used.
    let contracted = migrate(&scratch.url, true)?;
    ensure!(contracted.contains("applied V32__contract_tenant_keys"), "{contracted}");
    let refused = db.execute(PREVIOUS_CREATE, &[&"tc_e00000000001", &"prev-session-1", &"late"]).await;
    ensure!(refused.is_err(), "the previous release's idempotency index is gone");

    let fresh = ScratchDatabase::migrated_to("upgrade-fresh", None).await?;
    let (upgraded, new) = (schema(&scratch).await?, schema(&fresh).await?);
    let only_upgraded: Vec<_> = upgraded.iter().filter(|line| !new.contains(line)).collect();
    let only_new: Vec<_> = new.iter().filter(|line| !upgraded.contains(line)).collect();
    ensure!(
        only_upgraded.is_empty() && only_new.is_empty(),
        "the upgraded schema differs from a new one:\nonly upgraded: {only_upgraded:#?}\nonly new: {only_new:#?}"
    );
    Ok(())
}

/// A long read holding a table the migration must lock: the migration gives way to it and tries
/// again, so the requests arriving meanwhile are never queued behind the migration's lock for
/// the read's whole length, and the migration completes once the read is over.
#[tokio::test]
async fn a_migration_waits_for_a_long_read_without_holding_up_the_requests_behind_it() -> Result<()> {
    const HELD: Duration = Duration::from_secs(4);
    let scratch = ScratchDatabase::migrated_to("upgrade-give-way", Some(PREVIOUS_RELEASE)).await?;
    let mut long_read = scratch.connect().await?;
    let reading = long_read.transaction().await?;
    reading.query_one("SELECT count(*) FROM tool_calls", &[]).await?;

    let upgrade = {
        let url = scratch.url.clone();
        tokio::task::spawn_blocking(move || migrate(&url, false))
    };
    let requests = scratch.connect().await?;
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    while started.elapsed() < HELD {
        let asked = Instant::now();
        let request = requests.query("SELECT tool_call_id FROM tool_calls LIMIT 1", &[]);
        tokio::time::timeout(HELD, request).await.context("a request was held up behind the migration")??;
        longest = longest.max(asked.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure!(!upgrade.is_finished(), "the migration must wait for the long read");
    reading.commit().await?;
    let upgraded = upgrade.await??;
    ensure!(upgraded.contains("applied V31__"), "{upgraded}");
    // Queued behind the migration's lock, a request would have waited until the read ended.
    ensure!(longest < HELD / 2, "a request waited {longest:?} behind the migration");
    Ok(())
}

/// `gatehouse migrate --plan` on a populated database at V17 says what each migration would
/// lock, rehearsed on a scratch database, and changes nothing: no migration left to apply holds a
/// lock that makes requests wait while it does work that grows with a table of any size (the
/// check V29 added with its column scanned every call under an exclusive lock until V31 took
/// it over), and the scratch database is gone after.
#[tokio::test]
async fn the_plan_says_what_each_migration_locks_and_changes_nothing() -> Result<()> {
    let scratch = ScratchDatabase::migrated_to("upgrade-plan", Some(PREVIOUS_RELEASE)).await?;
    let db = scratch.connect().await?;
    db.execute(
        "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status, expires_at)
         SELECT 'tc_' || lpad(to_hex(n), 12, '0'), 'seed-' || (n % 100), 'fixture_action', 'fixture-tool',
                '{}'::jsonb, 'COMPLETED', now()
           FROM generate_series(1, 20000) AS n",
        &[],
    )
    .await?;
    db.batch_execute("ANALYZE tool_calls").await?;

    let out = gatehouse_tests::migrate(&scratch.url, &["--plan"])?;
    ensure!(out.status.success(), "migrate --plan: {}", String::from_utf8_lossy(&out.stderr));
    let plan = String::from_utf8_lossy(&out.stdout);
    ensure!(plan.contains("V18__tenant_rows\n"), "{plan}");
    ensure!(
        plan.contains("ahead: index tool_calls_tenant_created_idx built concurrently on tool_calls (20000 rows"),
        "{plan}"
    );
    ensure!(plan.contains("AccessExclusiveLock on tool_calls (20000 rows"), "{plan}");
    ensure!(plan.contains("left for `gatehouse migrate --contract`: V32__contract_tenant_keys"), "{plan}");
    for line in plan.lines().filter(|line| line.contains(" wait; ") && line.contains("grows with the table")) {
        let rows: f64 = line
            .split_once(" (")
            .and_then(|(_, rest)| rest.split_once(" rows"))
            .context("a table's size")?
            .0
            .parse()?;
        ensure!(rows < 1000.0, "a migration makes requests wait while it works through a table:\n{line}");
    }

    let applied: i32 = db.query_one("SELECT max(version) FROM refinery_schema_history", &[]).await?.get(0);
    ensure!(applied == PREVIOUS_RELEASE, "the plan applied migrations: at V{applied}");
    let column: i64 = db
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_name = 'tool_calls' AND column_name = 'tenant_id'",
            &[],
        )
        .await?
        .get(0);
    ensure!(column == 0, "the plan added columns ahead on the live database");
    let left: i64 =
        db.query_one("SELECT count(*) FROM pg_database WHERE datname LIKE 'gatehouse_plan_%'", &[]).await?.get(0);
    ensure!(left == 0, "the scratch database was left behind");
    Ok(())
}
