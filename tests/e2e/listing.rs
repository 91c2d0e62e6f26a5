//! The call list (`GET /voice-tools/calls`, and the dashboard's pages on it) at size: every
//! filter it offers reads about a page of rows however many calls the tenant has, including a
//! filter nothing matches, and answers exactly what the plain definition of each filter (the
//! effective status, newest first) selects. See docs/architecture.md, "Listing calls". The
//! migration that adds the list's indexes (V30) builds them while the running release writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{App, ScratchDatabase, lifecycle_options};
use gatehouse_tests::unique;
use reqwest::Method;
use serde_json::{Value, json};

/// The route's statement, as the store runs it.
const LIST: &str = include_str!("../../crates/store/src/sql/audit/calls.sql");
/// The data-scale benchmark's seeding: final calls of one tool over many sessions.
const SEED_CALLS: &str = include_str!("../../crates/bench/src/sql/seed_calls.sql");
const SEEDED: i64 = 20_000;
const TOOL: &str = "fixture_action";
/// The indexes V30 adds.
const LIST_INDEXES: [&str; 3] = [
    "tool_calls_tenant_status_created_idx",
    "tool_calls_tenant_function_created_idx",
    "tool_calls_tenant_function_status_created_idx",
];

/// One list request: `(session_id, function_name, status, limit)`.
type Filter = (Option<&'static str>, Option<&'static str>, Option<&'static str>, i64);

/// Every filter the API and the dashboard send, on a tenant with 20,000 final calls and a few
/// open ones: none reads more than a few rows beyond its page (before V30, a filter that matched
/// nothing walked every call), and each page is what the filter's plain definition selects.
#[tokio::test]
async fn every_list_filter_reads_about_a_page_and_answers_what_it_defines() -> Result<()> {
    let scratch = ScratchDatabase::create("listing").await?;
    let app = App::start(scratch.serve(lifecycle_options(&[], &["--sweep-interval", "0"]))).await?;
    let db = scratch.connect().await?;
    db.execute("SELECT create_history_partitions((now() - interval '3 days')::date, now()::date + 1)", &[]).await?;
    db.execute(SEED_CALLS, &[&1_i64, &SEEDED, &4_i64, &86_400.0_f64, &TOOL, &"fixture-tool"]).await?;

    // Open calls of the tenant's own: waiting, at a checkpoint, and one waiting call past its
    // deadline that the sweeper (off here) has not expired yet, which every route reports EXPIRED.
    let session = unique("listing");
    let mut waiting = Vec::new();
    for i in 0..3 {
        waiting.push(app.create_id(&session, json!({"to": format!("w{i}@example.com")}), None).await?);
    }
    db.execute(
        "UPDATE tool_calls SET expires_at = now() - interval '1 second' WHERE tool_call_id = $1",
        &[&waiting[0]],
    )
    .await?;
    db.batch_execute("ANALYZE tool_calls").await?;

    let filters: [Filter; 16] = [
        (None, None, None, 25),
        (None, None, Some("PREPARED"), 100),
        (None, None, Some("PENDING"), 100),
        (None, None, Some("EXPIRED"), 1),
        (None, None, Some("EXPIRED"), 100),
        (None, None, Some("EXECUTING"), 100),
        (None, None, Some("COMPLETED"), 25),
        (None, None, Some("FAILED"), 100),
        (None, Some("query_vector_db"), None, 25),
        (None, Some(TOOL), None, 100),
        (None, Some("query_vector_db"), Some("PREPARED"), 100),
        (None, Some(TOOL), Some("CANCELLED"), 25),
        (None, Some(TOOL), Some("PENDING"), 25),
        (Some("seed-7"), None, None, 25),
        (Some("seed-7"), Some(TOOL), Some("COMPLETED"), 25),
        (Some("nobody"), None, Some("PREPARED"), 25),
    ];
    for filter in filters {
        let (session_id, function_name, status, limit) = filter;
        let read = rows_read(&db, filter).await?;
        // A page, the row that says another follows, and the few stale waiting calls.
        ensure!(read.rows <= 2 * (limit + 1) + 8, "{filter:?} read {} rows:\n{}", read.rows, read.plan);

        let page = list_page(&app, filter).await?;
        let expected = defined_page(&db, filter).await?;
        ensure!(page == expected, "{filter:?}: the route listed {page:?}, the definition selects {expected:?}");
        if session_id.is_none() && function_name.is_none() {
            match status {
                Some("PENDING") => ensure!(page == waiting[1..].iter().rev().cloned().collect::<Vec<_>>()),
                Some("EXPIRED") => ensure!(page.first() == Some(&waiting[0]), "the stale call is the newest EXPIRED"),
                _ => {}
            }
        }
    }

    // A page after a cursor reads about a page too, and continues where the first one ended.
    let first = app.send(Method::GET, "/voice-tools/calls?status=COMPLETED&limit=25", None).await?;
    let cursor = first.body["next_cursor"].as_str().context("a second page")?;
    let (micros, id) = cursor.split_once('_').context("a cursor")?;
    let after = rows_read_after(&db, micros.parse()?, id).await?;
    ensure!(after.rows <= 2 * 26 + 8, "after a cursor: read {} rows:\n{}", after.rows, after.plan);
    Ok(())
}

/// How many rows the list statement's scans read (returned or removed by a filter), and its plan.
struct Read {
    rows: i64,
    plan: String,
}

async fn rows_read(db: &tokio_postgres::Client, (session, function, status, limit): Filter) -> Result<Read> {
    explain(db, &[&session, &function, &status, &None::<i64>, &None::<&str>, &limit, &"default"]).await
}

async fn rows_read_after(db: &tokio_postgres::Client, micros: i64, id: &str) -> Result<Read> {
    explain(db, &[&None::<&str>, &None::<&str>, &Some("COMPLETED"), &Some(micros), &Some(id), &25_i64, &"default"])
        .await
}

/// EXPLAIN ANALYZE of the route's statement with `params`, planned for them as the store has
/// it planned (each time).
async fn explain(db: &tokio_postgres::Client, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]) -> Result<Read> {
    let row = db.query_one(&format!("EXPLAIN (ANALYZE, FORMAT JSON, TIMING OFF) {LIST}"), params).await?;
    let plan: Value = row.try_get(0)?;
    let mut rows = 0.0;
    scanned(&plan[0]["Plan"], &mut rows);
    Ok(Read { rows: rows.round() as i64, plan: serde_json::to_string_pretty(&plan[0]["Plan"])? })
}

/// Adds up what each scan of a table in `node` and below read: the rows it returned and those a
/// filter removed, over all its loops (a scan of the statement's own intermediate results is
/// not a read of the table).
fn scanned(node: &Value, rows: &mut f64) {
    if node.get("Relation Name").is_some() {
        let loops = node["Actual Loops"].as_f64().unwrap_or(1.0);
        let returned = node["Actual Rows"].as_f64().unwrap_or(0.0);
        let removed = ["Rows Removed by Filter", "Rows Removed by Index Recheck"]
            .iter()
            .map(|key| node[*key].as_f64().unwrap_or(0.0))
            .sum::<f64>();
        *rows += (returned + removed) * loops;
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        scanned(child, rows);
    }
}

/// The ids the route lists for `filter`, newest first.
async fn list_page(app: &App, (session, function, status, limit): Filter) -> Result<Vec<String>> {
    let mut query = vec![format!("limit={limit}")];
    query.extend(session.map(|s| format!("session_id={s}")));
    query.extend(function.map(|f| format!("function_name={f}")));
    query.extend(status.map(|s| format!("status={s}")));
    let answer = app.send(Method::GET, &format!("/voice-tools/calls?{}", query.join("&")), None).await?;
    ensure!(answer.status == 200, "{query:?}: {}", answer.body);
    Ok(answer.body["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|call| call["tool_call_id"].as_str().map(str::to_owned))
        .collect())
}

/// The ids the filter's plain definition selects: the tenant's calls with the effective status,
/// newest first.
async fn defined_page(db: &tokio_postgres::Client, (session, function, status, limit): Filter) -> Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT tool_call_id FROM tool_calls
              WHERE tenant_id = 'default'
                AND ($1::text IS NULL OR session_id = $1)
                AND ($2::text IS NULL OR function_name = $2)
                AND ($3::text IS NULL OR tool_call_effective_status(status, expires_at) = $3)
              ORDER BY created_at DESC, tool_call_id DESC
              LIMIT $4",
            &[&session, &function, &status, &limit],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// `gatehouse migrate` from V29 to V30 on a tenant with 100,000 calls builds the list's indexes
/// concurrently: calls written meanwhile, each allowed to wait 200 ms for a lock, are never
/// refused for one (a plain CREATE INDEX holds a lock every write waits for, for the whole
/// build), and the indexes it leaves are valid.
#[tokio::test]
async fn the_lists_indexes_are_built_while_calls_are_written() -> Result<()> {
    let scratch = ScratchDatabase::migrated_to("listing-upgrade", Some(29)).await?;
    let db = scratch.connect().await?;
    db.execute("SELECT create_history_partitions((now() - interval '3 days')::date, now()::date + 1)", &[]).await?;
    db.execute(SEED_CALLS, &[&1_i64, &100_000_i64, &4_i64, &86_400.0_f64, &TOOL, &"fixture-tool"]).await?;

    let writer = scratch.connect().await?;
    writer.batch_execute("SET lock_timeout = '200ms'").await?;
    let migrating = Arc::new(AtomicBool::new(true));
    let still = migrating.clone();
    let writes = tokio::spawn(async move {
        let (mut written, mut n) = (0_u32, 200_000_i64);
        while still.load(Ordering::SeqCst) {
            writer.execute(SEED_CALLS, &[&n, &1_i64, &4_i64, &60.0_f64, &TOOL, &"fixture-tool"]).await?;
            written += 1;
            n += 1;
        }
        anyhow::Ok(written)
    });
    let url = scratch.url.clone();
    let migrated = tokio::task::spawn_blocking(move || {
        std::process::Command::new(gatehouse_tests::gatehouse_bin()).arg("migrate").env("DATABASE_URL", url).output()
    })
    .await??;
    migrating.store(false, Ordering::SeqCst);
    let written = writes.await?.context("a write during the migration was refused")?;
    ensure!(migrated.status.success(), "{}", String::from_utf8_lossy(&migrated.stderr));
    ensure!(written > 0, "no call was written while the migration ran");

    let invalid: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE c.relname = ANY($1) AND NOT i.indisvalid",
            &[&&LIST_INDEXES[..]],
        )
        .await?
        .get(0);
    let built: i64 =
        db.query_one("SELECT count(*) FROM pg_class WHERE relname = ANY($1)", &[&&LIST_INDEXES[..]]).await?.get(0);
    ensure!(invalid == 0 && built == 3, "{built} of the list's 3 indexes, {invalid} invalid");
    Ok(())
}
