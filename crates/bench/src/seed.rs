//! The data-scale benchmark's data (docs/benchmarks.md, "At scale"): the first tenant's calls
//! and a tool's executions, made by the database itself (`generate_series`, a batch a
//! statement) so that ten million calls take minutes, not hours.
//!
//! Seeding tops up: `--seed-calls 1000000` after `--seed-calls 10000` adds the 990,000 calls
//! missing, so one database is measured at each size in turn. Seeded calls are final and old
//! (an hour and more), so no sweep, limit or route that lists open calls meets them; their
//! executions and callbacks are what those calls would have left.
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use gatehouse_domain::keys::DEFAULT_TENANT;

use crate::lifecycle::{FUNCTION, TOOL};
use crate::relay::Relay;

const SEED_CALLS_SQL: &str = include_str!("sql/seed_calls.sql");
const SEED_EXECUTIONS_SQL: &str = include_str!("sql/seed_executions.sql");
const SEED_EXPIRING_SQL: &str = include_str!("sql/seed_expiring.sql");
/// The sweeper's statement that adds recorded executions to the stats' rollups.
const FOLD_ROLLUPS_SQL: &str = include_str!("../../store/src/sql/history/fold_rollups.sql");
/// Executions the seeding adds to the rollups per statement.
const FOLD_BATCH: i64 = 100_000;
/// The sweeper's retention statements (docs/architecture.md, "Retention").
const KEEP_PARTITIONS_SQL: &str = include_str!("../../store/src/sql/retention/keep_partitions.sql");
const FORGET_FINAL_CALLS_SQL: &str = include_str!("../../store/src/sql/retention/forget_final_calls.sql");
/// Final calls the retention run forgets per statement (the sweeper takes 1,000 a statement,
/// twenty statements a pass).
const FORGET_BATCH: i64 = 10_000;

/// Seeded calls' ids: `tc_5eed` and eight hex digits (their number); the range they sort in.
const SEEDED_IDS: (&str, &str) = ("tc_5eed", "tc_5eee");
/// The backlog's calls' ids, likewise: `tc_5eef` and eight hex digits.
const BACKLOG_IDS: (&str, &str) = ("tc_5eef", "tc_5ef0");
/// Calls a seeded session holds.
const CALLS_PER_SESSION: i64 = 4;
/// Rows one statement writes: large enough that a batch costs little beyond its rows, small
/// enough that none holds a transaction for long.
const CALL_BATCH: u64 = 50_000;
const EXECUTION_BATCH: u64 = 200_000;
/// The window the seeded executions fill, as the stats route's default window.
const EXECUTIONS_WINDOW_SECONDS: f64 = 86_400.0;

/// What to seed before measuring.
pub(crate) struct SeedPlan {
    /// Seeded calls wanted in all.
    pub(crate) calls: u64,
    /// The fixture tool's executions wanted in the last day, seeded calls' included.
    pub(crate) executions: u64,
    /// The days the seeded calls' sessions spread over.
    pub(crate) days: f64,
}

/// Tops the seeded data up to `plan`, printing its progress, and then the database's size.
pub(crate) async fn seed(database_url: &str, plan: &SeedPlan) -> Result<()> {
    let (db, _driver) = gatehouse_pg_connect::connect(database_url).await.context("connecting to seed")?;
    // The seeded days' partitions first, so that their rows do not land in the default one.
    db.execute(
        "SELECT create_history_partitions((now() - make_interval(secs => $1))::date, now()::date + 1)",
        &[&(plan.days * 86_400.0 + 7_200.0)],
    )
    .await
    .context("creating the seeded days' partitions")?;
    let seeded_calls = next_number(&db, SEEDED_IDS).await?;
    let mut next = seeded_calls;
    let started = Instant::now();
    while next < plan.calls {
        let batch = CALL_BATCH.min(plan.calls - next);
        db.execute(
            SEED_CALLS_SQL,
            &[&(next as i64), &(batch as i64), &CALLS_PER_SESSION, &(plan.days * 86_400.0), &FUNCTION, &TOOL],
        )
        .await
        .context("seeding calls")?;
        next += batch;
        let rate = (next - seeded_calls) as f64 / started.elapsed().as_secs_f64();
        println!("seed: {next} of {} calls ({rate:.0} calls/s)", plan.calls);
    }
    let recent = recent_executions(&db).await?;
    let started = Instant::now();
    let mut made = 0;
    while recent + made < plan.executions {
        let batch = EXECUTION_BATCH.min(plan.executions - recent - made);
        // Numbered after everything already there, so a top-up does not repeat a pattern.
        let first = (recent + made) as i64 + 1_000_000_000;
        db.execute(SEED_EXECUTIONS_SQL, &[&first, &(batch as i64), &EXECUTIONS_WINDOW_SECONDS, &FUNCTION, &TOOL])
            .await
            .context("seeding executions")?;
        made += batch;
        let rate = made as f64 / started.elapsed().as_secs_f64();
        println!("seed: {} of {} executions in the last day ({rate:.0} rows/s)", recent + made, plan.executions);
    }
    if next > seeded_calls || made > 0 {
        roll_up(&db).await?;
        db.batch_execute(
            "ANALYZE tool_calls; ANALYZE tool_executions; ANALYZE callback_attempts; ANALYZE tool_execution_rollups",
        )
        .await
        .context("analyzing the seeded tables")?;
    }
    print_sizes(&db).await
}

/// Adds the executions recorded so far to the stats' rollups, as the sweeper does every few
/// seconds (the benchmark's application runs none, so that each route is measured alone).
pub(crate) async fn roll_up_at(database_url: &str) -> Result<()> {
    let (db, _driver) = gatehouse_pg_connect::connect(database_url).await.context("connecting to roll up")?;
    roll_up(&db).await
}

/// Adds the seeded executions to the stats' rollups, as the sweeper would have long since.
async fn roll_up(db: &tokio_postgres::Client) -> Result<()> {
    let started = Instant::now();
    let (added, _) = until_short(db, FOLD_ROLLUPS_SQL, &[&FOLD_BATCH], FOLD_BATCH)
        .await
        .context("adding executions to the rollups")?;
    let rate = added as f64 / started.elapsed().as_secs_f64();
    println!("seed: {added} executions added to the rollups ({rate:.0} rows/s)");
    Ok(())
}

/// Runs `sql`, whose one row's first column says how many rows it handled, again while it
/// handles a full `batch`: how many it handled in all, and the longest statement.
async fn until_short(
    db: &tokio_postgres::Client,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    batch: i64,
) -> Result<(i64, Duration), tokio_postgres::Error> {
    let (mut handled, mut longest) = (0, Duration::ZERO);
    loop {
        let statement = Instant::now();
        let done: i64 = db.query_one(sql, params).await?.get(0);
        longest = longest.max(statement.elapsed());
        handled += done;
        if done < batch {
            return Ok((handled, longest));
        }
    }
}

/// Stale calls still waiting, through the sweeper's own index (`tool_calls_waiting_expiry_idx`).
const STALE_CALLS_SQL: &str =
    "SELECT count(*) FROM tool_calls WHERE status IN ('PENDING', 'PREPARED') AND expires_at <= now()";
/// How often the backlog is counted, and how long it may take to drain before the benchmark
/// gives up following it.
const BACKLOG_SAMPLE: Duration = Duration::from_secs(1);
const BACKLOG_PATIENCE: Duration = Duration::from_secs(1800);

/// How long after seeding starts the backlog reaches its deadline: time to seed (about 10,000
/// calls a second), vacuum and checkpoint, with room to spare.
fn backlog_settle(calls: u64) -> Duration {
    Duration::from_secs(5) + Duration::from_secs_f64(calls as f64 / 2000.0)
}

/// How long after the drain the benchmark waits for the backlog's last expiry reports.
const REPORTS_PATIENCE: Duration = Duration::from_secs(600);

/// A sweeper's backlog seeded before the scenarios, and counted every second while they run
/// and after, until it is gone; with a relay, the expiry reports it receives are followed too.
pub(crate) struct Backlog {
    calls: u64,
    counted_from: Instant,
    counts: tokio::task::JoinHandle<Result<Vec<(Duration, i64)>>>,
    relay: Option<Relay>,
}

impl Backlog {
    /// Adds `calls` waiting calls (ids after the last seeded backlog) whose deadline comes
    /// once the database has settled from their seeding, waits for it, and starts counting the
    /// stale calls left.
    ///
    /// Settled: vacuumed, analyzed and checkpointed, as calls made over the minutes before an
    /// outage would be. Measured right after a bulk insert, the create would wait on the
    /// insert's own aftermath (autovacuum, the checkpoint writing its pages) and not on the
    /// sweeper.
    pub(crate) async fn seed(database_url: &str, calls: u64, relay: Option<Relay>) -> Result<Backlog> {
        let (db, driver) = gatehouse_pg_connect::connect(database_url).await.context("connecting to seed")?;
        let deadline = Instant::now() + backlog_settle(calls);
        let mut next = i64::try_from(next_number(&db, BACKLOG_IDS).await?).context("a backlog id's number")?;
        let end = next + i64::try_from(calls).context("backlog size")?;
        while next < end {
            let batch = (CALL_BATCH as i64).min(end - next);
            let until_deadline = deadline.saturating_duration_since(Instant::now()).as_secs_f64();
            let callback_url = relay.as_ref().map(|relay| relay.url.as_str());
            db.execute(SEED_EXPIRING_SQL, &[&next, &batch, &FUNCTION, &TOOL, &until_deadline, &callback_url])
                .await
                .context("seeding the backlog")?;
            next += batch;
        }
        db.batch_execute("VACUUM (ANALYZE) tool_calls").await.context("vacuuming after seeding the backlog")?;
        if let Err(e) = db.batch_execute("CHECKPOINT").await {
            println!("backlog: no checkpoint after seeding ({e}); the create may wait on the seeding's writes");
        }
        match deadline.checked_duration_since(Instant::now()) {
            Some(wait) => tokio::time::sleep(wait + BACKLOG_SAMPLE / 4).await,
            None => println!("backlog: seeding took longer than its settling time; the sweeper started meanwhile"),
        }
        println!("backlog: {calls} waiting calls past their deadline");
        let counted_from = Instant::now();
        let counts = tokio::spawn(async move {
            let _driver = driver;
            let started = counted_from;
            let mut counts = Vec::new();
            loop {
                let left: i64 = db.query_one(STALE_CALLS_SQL, &[]).await?.get(0);
                counts.push((started.elapsed(), left));
                if left == 0 || started.elapsed() > BACKLOG_PATIENCE {
                    return Ok(counts);
                }
                tokio::time::sleep(BACKLOG_SAMPLE).await;
            }
        });
        Ok(Backlog { calls, counted_from, counts, relay })
    }

    /// Waits until the backlog is gone (or the patience is over), and prints how it went down.
    pub(crate) async fn drained(self) -> Result<()> {
        let counts = self.counts.await.context("the backlog's counter")??;
        let mut shown = Duration::ZERO;
        for (at, left) in &counts {
            if *at >= shown || *left == 0 {
                println!("backlog: {left:>7} stale calls left at {:>5.1} s", at.as_secs_f64());
                shown = *at + Duration::from_secs(10);
            }
        }
        match counts.last() {
            Some((at, 0)) => {
                let rate = self.calls as f64 / at.as_secs_f64().max(f64::EPSILON);
                println!("backlog: drained in {:.1} s ({rate:.0} calls/s)", at.as_secs_f64());
            }
            _ => println!("backlog: not drained after {} s", BACKLOG_PATIENCE.as_secs()),
        }
        if let (Some(relay), Some((drained_after, 0))) = (&self.relay, counts.last()) {
            follow_reports(self.calls, relay, self.counted_from + *drained_after).await;
        }
        Ok(())
    }
}

/// Waits for an expiry report about each of the backlog's `calls` (or the patience), and prints
/// how many came while the sweeper drained the backlog and when the last one came.
async fn follow_reports(calls: u64, relay: &Relay, drained: Instant) {
    let wanted = usize::try_from(calls).unwrap_or(usize::MAX);
    loop {
        let reports = relay.first_callbacks(BACKLOG_IDS.0);
        let waited = drained.elapsed();
        if reports.len() >= wanted || waited > REPORTS_PATIENCE {
            let by_drain = reports.values().filter(|(at, _)| *at <= drained).count();
            let unsigned = reports.values().filter(|(_, signed)| !signed).count();
            let last = reports.values().map(|(at, _)| *at).max();
            println!(
                "backlog: {} of {wanted} expiry reports delivered ({by_drain} by the drain, {unsigned} with a \
                 signature that did not verify)",
                reports.len()
            );
            match last {
                Some(last) if last > drained => {
                    println!("backlog: the last report came {:.1} s after the drain", (last - drained).as_secs_f64())
                }
                Some(_) => println!("backlog: the last report came before the drain"),
                None => println!("backlog: no report came"),
            }
            return;
        }
        tokio::time::sleep(BACKLOG_SAMPLE).await;
    }
}

/// Applies the sweeper's retention once, as far as it goes, printing how long its statements
/// took and the database's size after.
pub(crate) async fn apply_retention(database_url: &str, history_days: i32, calls_days: i32) -> Result<()> {
    let (db, _driver) = gatehouse_pg_connect::connect(database_url).await.context("connecting for retention")?;
    let started = Instant::now();
    let kept = db.query_one(KEEP_PARTITIONS_SQL, &[&history_days]).await.context("keeping the history's partitions")?;
    let kept: serde_json::Value = kept.get(0);
    println!("retention: partitions {kept} in {:.1} ms", started.elapsed().as_secs_f64() * 1000.0);
    if calls_days > 0 {
        let started = Instant::now();
        let (forgotten, longest) =
            until_short(&db, FORGET_FINAL_CALLS_SQL, &[&calls_days, &FORGET_BATCH], FORGET_BATCH)
                .await
                .context("forgetting final calls")?;
        let rate = forgotten as f64 / started.elapsed().as_secs_f64();
        println!(
            "retention: {forgotten} final calls forgotten ({rate:.0} calls/s, longest statement {:.0} ms for {FORGET_BATCH})",
            longest.as_secs_f64() * 1000.0
        );
    }
    print_sizes(&db).await
}

/// The number the next seeded call of `ids` (its prefix, and the prefix its range sorts before)
/// takes: the highest such id's number plus one, by the primary key, or 0.
async fn next_number(db: &tokio_postgres::Client, ids: (&str, &str)) -> Result<u64> {
    let row = db
        .query_one(
            "SELECT max(tool_call_id) FROM tool_calls WHERE tool_call_id >= $1 AND tool_call_id < $2",
            &[&ids.0, &ids.1],
        )
        .await?;
    let highest: Option<String> = row.get(0);
    Ok(match highest {
        Some(id) => u64::from_str_radix(&id[ids.0.len()..], 16).context("a seeded id's number")? + 1,
        None => 0,
    })
}

/// The fixture tool's executions in the stats route's default window, through its index.
async fn recent_executions(db: &tokio_postgres::Client) -> Result<u64> {
    let row = db
        .query_one(
            "SELECT count(*) FROM tool_executions
              WHERE tenant_id = $1 AND tool = $2 AND started_at >= now() - make_interval(secs => $3)",
            &[&DEFAULT_TENANT, &FUNCTION, &EXECUTIONS_WINDOW_SECONDS],
        )
        .await?;
    Ok(row.get::<_, i64>(0) as u64)
}

/// The rows and bytes on disk (indexes and TOAST included, every partition's) of the tables
/// that grow with calls.
async fn print_sizes(db: &tokio_postgres::Client) -> Result<()> {
    let rows = db
        .query(
            "SELECT t.name, sum(greatest(c.reltuples, 0))::int8, sum(pg_total_relation_size(p.relid))::int8,
                    pg_database_size(current_database())
               FROM unnest(ARRAY['tool_calls', 'tool_executions', 'callback_attempts', 'tool_execution_rollups',
                                 'documents']) AS t(name)
              -- A table that is not partitioned has no tree: it is its own only part.
              CROSS JOIN LATERAL (SELECT relid FROM pg_partition_tree(t.name::regclass)
                                  UNION SELECT t.name::regclass) AS p
               JOIN pg_class c ON c.oid = p.relid
              GROUP BY t.name
              ORDER BY t.name",
            &[],
        )
        .await?;
    if let Some(first) = rows.first() {
        println!("database: {} MB on disk", first.get::<_, i64>(3) / 1_000_000);
    }
    for row in &rows {
        let (table, estimated_rows, bytes): (String, i64, i64) = (row.get(0), row.get(1), row.get(2));
        println!("  {table:<22} about {:>11} rows {:>8} MB", estimated_rows.max(0), bytes / 1_000_000);
    }
    Ok(())
}
