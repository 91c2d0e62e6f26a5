//! Retention at a small scale (docs/architecture.md, "Retention"): the sweeper creates the
//! history's week partitions ahead, moves rows the default partition caught into partitions of
//! their own, drops whole partitions past `history_retention_days`, and forgets final calls past
//! `calls_retention_days`, never a call that is not final, whatever its age.

use anyhow::{Context, Result};
use gatehouse_tests::lifecycle::{App, ScratchDatabase, lifecycle_options};
use gatehouse_tests::unique;
use serde_json::json;

const TOOL: &str = "fixture_action";
const HISTORY_DAYS: i32 = 10;
const CALLS_DAYS: i32 = 20;

/// An execution of the fixture tool and a callback attempt `days_ago`, with `marker` as the
/// execution's component version and the attempt's URL, to find them again.
async fn history_at(db: &tokio_postgres::Client, days_ago: f64, marker: &str) -> Result<()> {
    db.execute(
        "INSERT INTO tool_executions (tool, component, component_version, operation, started_at, duration_ms, outcome)
         VALUES ($1, 'fixture-tool', $2, 'validate', now() - make_interval(secs => $3::float8 * 86400), 1.5, 'ok')",
        &[&TOOL, &marker, &days_ago],
    )
    .await?;
    db.execute(
        "INSERT INTO callback_attempts (tool_call_id, kind, url, attempt, status_code, duration_ms, created_at)
         VALUES ('tc_000000000000', 'completion', $1, 1, 200, 2.0, now() - make_interval(secs => $2::float8 * 86400))",
        &[&marker, &days_ago],
    )
    .await?;
    Ok(())
}

/// Where the history rows marked `marker` are: the partitions holding them, or none.
async fn partitions_of(db: &tokio_postgres::Client, marker: &str) -> Result<Vec<String>> {
    let rows = db
        .query(
            "SELECT tableoid::regclass::text FROM tool_executions WHERE component_version = $1
              UNION ALL
             SELECT tableoid::regclass::text FROM callback_attempts WHERE url = $1
              ORDER BY 1",
            &[&marker],
        )
        .await?;
    Ok(rows.iter().map(|row| row.get(0)).collect())
}

/// Moves a call's creation `days` back, as if it had been made then.
async fn age(db: &tokio_postgres::Client, id: &str, days: f64) -> Result<()> {
    let changed = db
        .execute(
            "UPDATE tool_calls SET created_at = created_at - make_interval(secs => $2::float8 * 86400) WHERE tool_call_id = $1",
            &[&id, &days],
        )
        .await?;
    anyhow::ensure!(changed == 1, "no call {id}");
    Ok(())
}

async fn exists(db: &tokio_postgres::Client, id: &str) -> Result<bool> {
    Ok(db.query_one("SELECT EXISTS (SELECT 1 FROM tool_calls WHERE tool_call_id = $1)", &[&id]).await?.get(0))
}

#[tokio::test]
async fn retention_drops_whole_partitions_and_forgets_only_final_calls() -> Result<()> {
    let scratch = ScratchDatabase::create("retention").await?;
    let (history_days, calls_days) = (HISTORY_DAYS.to_string(), CALLS_DAYS.to_string());
    let variables = [("history_retention_days", history_days.as_str()), ("calls_retention_days", calls_days.as_str())];
    let app = App::start(scratch.serve(lifecycle_options(&variables, &["--sweep-interval", "0"]))).await?;
    let db = scratch.connect().await?;

    // A fresh database has this week's partition and the next week's, and nothing before.
    let days: Vec<(String, i32)> = db
        .query(
            "SELECT parent, count(*)::int4 FROM history_partitions() WHERE lower IS NOT NULL GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(String, i32)> =
        ["callback_attempts", "tool_execution_rollups", "tool_executions"].iter().map(|t| ((*t).into(), 2)).collect();
    assert_eq!(days, expected);

    // History past its retention in a partition of its own, past it in the default partition,
    // and within it in the default partition (a week no sweeper has created yet). Thirty days
    // back, the week's partition ends before the ten days' horizon whatever the weekday.
    db.execute(
        "SELECT create_history_partitions((now() - interval '30 days')::date, (now() - interval '30 days')::date)",
        &[],
    )
    .await?;
    history_at(&db, 30.0, "old-partitioned").await?;
    history_at(&db, 25.0, "old-default").await?;
    history_at(&db, 8.0, "recent-default").await?;
    history_at(&db, 0.0, "today").await?;
    let old_partition = partitions_of(&db, "old-partitioned").await?;
    let old_suffix = partition_suffix(&db, 30).await?;
    assert_eq!(old_partition.len(), 2, "{old_partition:?}");
    assert!(old_partition.iter().all(|p| p.ends_with(&old_suffix)), "{old_partition:?}");
    assert!(partitions_of(&db, "recent-default").await?.iter().all(|p| p.ends_with("_default")));

    // Calls: final and old, not final and old, final and young.
    let session = unique("retention");
    let old_final = app.create_id(&session, json!({"to": "a@example.com"}), None).await?;
    assert_eq!(app.cancel(&old_final).await?.status, 200);
    let old_open = app.create_id(&session, json!({"to": "b@example.com"}), None).await?;
    let young_final = app.create_id(&session, json!({"to": "c@example.com"}), None).await?;
    assert_eq!(app.cancel(&young_final).await?.status, 200);
    age(&db, &old_final, 30.0).await?;
    age(&db, &old_open, 30.0).await?;
    age(&db, &young_final, 10.0).await?;
    // More old final calls than one statement forgets (1,000): copies of the first.
    let copies = db
        .execute(
            "INSERT INTO tool_calls
             SELECT (jsonb_populate_record(NULL::tool_calls, to_jsonb(c) || jsonb_build_object(
                       'tool_call_id', 'tc_' || substr(md5(c.tool_call_id || n), 1, 12), 'idempotency_key', NULL,
                       'intent_id', 'retention-copy', 'report_owed_since', NULL))).*
               FROM tool_calls c, generate_series(1, 1500) AS n
              WHERE c.tool_call_id = $1",
            &[&old_final],
        )
        .await?;
    assert_eq!(copies, 1500);

    // One pass: its statements are done when it answers.
    let sweep = app.sweep().await?;
    assert_eq!(sweep.status, 200, "{}", sweep.body);

    assert_eq!(partitions_of(&db, "old-partitioned").await?, Vec::<String>::new(), "dropped with its partition");
    assert_eq!(partitions_of(&db, "old-default").await?, Vec::<String>::new(), "removed from the default partition");
    let recent = partitions_of(&db, "recent-default").await?;
    let recent_suffix = partition_suffix(&db, 8).await?;
    assert_eq!(recent.len(), 2, "{recent:?}");
    assert!(recent.iter().all(|p| p.ends_with(&recent_suffix)), "moved into its week's partition: {recent:?}");
    assert_eq!(partitions_of(&db, "today").await?.len(), 2);
    let too_old: i64 = db
        .query_one(
            "SELECT count(*) FROM history_partitions()
              WHERE upper <= date_trunc('day', now(), 'UTC') - make_interval(days => $1)",
            &[&HISTORY_DAYS],
        )
        .await?
        .get(0);
    assert_eq!(too_old, 0, "no partition older than the retention is left");
    let in_default: i64 = db
        .query_one(
            "SELECT (SELECT count(*) FROM tool_executions_default) + (SELECT count(*) FROM callback_attempts_default)",
            &[],
        )
        .await?
        .get(0);
    assert_eq!(in_default, 0);

    assert!(!exists(&db, &old_final).await?, "a final call past its retention is forgotten");
    let copies_left: i64 = db
        .query_one(
            "SELECT count(*) FROM tool_calls WHERE session_id = $1 AND intent_id = 'retention-copy'",
            &[&session],
        )
        .await?
        .get(0);
    assert_eq!(copies_left, 0, "one pass forgets statement after statement while they come back full");
    assert!(exists(&db, &old_open).await?, "a call that is not final stays, whatever its age");
    assert!(exists(&db, &young_final).await?, "a final call within its retention stays");
    assert_eq!(app.status(&old_final).await?.status, 404);
    let open = app.status(&old_open).await?;
    assert_eq!((open.status, open.body["status"].as_str()), (200, Some("PENDING")), "{}", open.body);

    // The history routes read the partitions as one table.
    let page = app.send(reqwest::Method::GET, &format!("/voice-tools/tools/{TOOL}/executions?limit=100"), None).await?;
    assert_eq!(page.status, 200, "{}", page.body);
    let versions: Vec<&str> = page.body["executions"]
        .as_array()
        .context("executions")?
        .iter()
        .filter_map(|e| e["component_version"].as_str())
        .collect();
    assert!(versions.contains(&"today") && !versions.contains(&"old-partitioned"), "{versions:?}");
    Ok(())
}

/// The name suffix of the week partition holding the day `days_ago` (UTC): its Monday.
async fn partition_suffix(db: &tokio_postgres::Client, days_ago: i32) -> Result<String> {
    let row = db
        .query_one(
            "SELECT '_' || to_char(date_trunc('week', (now() AT TIME ZONE 'UTC')::date - $1::int4), 'YYYYMMDD')",
            &[&days_ago],
        )
        .await?;
    Ok(row.get(0))
}

/// A database that holds history when it is upgraded (docs/deploying.md, "Upgrading"): each
/// table's rows become its `_earlier` partition as they are, with the same indexes, ids go on
/// from where they were, and the stats' trigger and rollups keep working.
#[tokio::test]
async fn an_upgrade_keeps_the_history_as_its_first_partition() -> Result<()> {
    let scratch = ScratchDatabase::migrated_to("upgrade", Some(21)).await?;
    let db = scratch.connect().await?;
    db.batch_execute(
        "INSERT INTO tool_executions (tool, component, component_version, operation, started_at, duration_ms, outcome)
         SELECT 'fixture_action', 'fixture-tool', 'before', 'validate', now() - g * interval '1 hour', 1.0, 'ok'
           FROM generate_series(1, 500) AS g;
         INSERT INTO callback_attempts (tool_call_id, kind, url, attempt, status_code, duration_ms, created_at)
         SELECT 'tc_000000000000', 'completion', 'before', 1, 200, 2.0, now() - g * interval '1 hour'
           FROM generate_series(1, 300) AS g;",
    )
    .await?;
    let fold = include_str!("../../crates/store/src/sql/history/fold_rollups.sql");
    let folded: i64 = db.query_one(fold, &[&10_000_i64]).await?.get(0);
    assert_eq!(folded, 500);
    let highest: i64 = db.query_one("SELECT max(execution_id) FROM tool_executions", &[]).await?.get(0);
    let indexes = |table: &'static str| {
        let db = &db;
        async move {
            let count: i64 =
                db.query_one("SELECT count(*) FROM pg_index WHERE indrelid = to_regclass($1)", &[&table]).await?.get(0);
            anyhow::Ok(count)
        }
    };
    let executions_indexes = indexes("tool_executions").await?;

    // Every migration but the contract step (V32), which then drops the two indexes without the
    // tenant that V18 left for the release before it.
    scratch.migrate(Some(31))?;

    let placed = db
        .query(
            "SELECT tableoid::regclass::text, count(*) FROM tool_executions GROUP BY 1
              UNION ALL SELECT tableoid::regclass::text, count(*) FROM callback_attempts GROUP BY 1
              UNION ALL SELECT tableoid::regclass::text, count(*) FROM tool_execution_rollups GROUP BY 1
              ORDER BY 1",
            &[],
        )
        .await?;
    let placed: Vec<(String, i64)> = placed.iter().map(|row| (row.get(0), row.get(1))).collect();
    let rollup_rows = placed.iter().find(|(t, _)| t == "tool_execution_rollups_earlier").map_or(0, |(_, n)| *n);
    assert!(rollup_rows > 0, "{placed:?}");
    assert_eq!(
        placed,
        vec![
            ("callback_attempts_earlier".to_owned(), 300),
            ("tool_execution_rollups_earlier".to_owned(), rollup_rows),
            ("tool_executions_earlier".to_owned(), 500),
        ]
    );
    // The old indexes serve as the partitioned ones' first parts, none built twice.
    assert_eq!(indexes("tool_executions_earlier").await?, executions_indexes);

    // A new execution: the next id, the inbox trigger, and the rollups' upsert on the new key.
    db.execute(
        "INSERT INTO tool_executions (tool, component, component_version, operation, started_at, duration_ms, outcome)
         VALUES ('fixture_action', 'fixture-tool', 'after', 'validate', now(), 1.0, 'ok')",
        &[],
    )
    .await?;
    let next: i64 =
        db.query_one("SELECT execution_id FROM tool_executions WHERE component_version = 'after'", &[]).await?.get(0);
    assert_eq!(next, highest + 1);
    let folded: i64 = db.query_one(fold, &[&10_000_i64]).await?.get(0);
    assert_eq!(folded, 1);
    let counted: i64 = db
        .query_one("SELECT sum(executions)::int8 FROM tool_execution_rollups WHERE period = 'hour'", &[])
        .await?
        .get(0);
    assert_eq!(counted, 501);
    Ok(())
}
