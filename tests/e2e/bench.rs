//! `gatehouse bench` end to end on a small corpus: the `embed` scenario prints its figures,
//! `embed-serve` the embeddings server's rate at each level, `recall` its table of recall@10 by
//! filter, and without `--url` each level of `create`
//! prints the CPU per request of the runner and of PostgreSQL. The figures are checked for being there and positive, never against a speed.
use std::process::Command;

use anyhow::{Context, Result, ensure};
use gatehouse_tests::lifecycle::{App, ScratchDatabase, lifecycle_options};
use gatehouse_tests::{TOKEN, gatehouse_bin, shared_state_dir, synthetic_corpus, workspace_root};

/// Documents in the corpus: enough for a few of ingest's calls' worth of texts, few enough to
/// embed in a second or two.
const DOCUMENTS: usize = 64;

/// The number after `label` in `text` (its first occurrence), without a trailing `%`, `,`,
/// `;` or `)`.
fn number_after(text: &str, label: &str) -> Result<f64> {
    let rest = &text[text.find(label).with_context(|| format!("no {label:?} in:\n{text}"))? + label.len()..];
    let word = rest.split_whitespace().next().unwrap_or_default().trim_end_matches([',', ';', '%', ')']);
    word.parse().with_context(|| format!("{label:?} is followed by {word:?}"))
}

fn gatehouse(args: &[&str], database_url: &str) -> Result<String> {
    let output = Command::new(gatehouse_bin())
        .args(args)
        .env("DATABASE_URL", database_url)
        .env("GATEHOUSE_STATE_DIR", shared_state_dir())
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("running gatehouse {}", args.join(" ")))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    ensure!(
        output.status.success(),
        "gatehouse {} failed:\n{stdout}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(stdout)
}

#[tokio::test]
async fn bench_prints_the_embedding_figures_and_the_cpu_split() -> Result<()> {
    let database = ScratchDatabase::create("gatehouse_bench").await?;
    let corpus = synthetic_corpus(DOCUMENTS)?;
    gatehouse(&["ingest", &corpus.to_string_lossy()], &database.url)?;
    let _ = std::fs::remove_file(&corpus);

    let manifest = workspace_root().join("tests/fixtures/lifecycle.toml");
    let manifest = manifest.to_string_lossy();
    let args = [
        "bench",
        "--manifest",
        &manifest,
        "--scenario",
        "embed,embed-serve,recall,create",
        "--concurrency",
        "2",
        "--seconds",
        "1",
    ];
    let printed = gatehouse(&args, &database.url)?;
    recall_table_is_whole(&printed)?;
    embeddings_server_row_is_whole(&printed)?;

    let embed = printed.lines().skip_while(|l| !l.starts_with("embed:")).take(5).collect::<Vec<_>>().join("\n");
    ensure!(number_after(&embed, "\n  documents")? == DOCUMENTS as f64, "{embed}");
    for label in [
        "tokens",
        "seconds",
        "docs/s",
        "tokens/s",
        "model GFLOP/s",
        "matrix GFLOP/s",
        "side by side (",
        "share",
        "p50",
        "p99",
    ] {
        let value = number_after(&embed, label)?;
        ensure!(value > 0.0 && value.is_finite(), "{label} is {value} in:\n{embed}");
    }
    let evicted =
        embed.lines().find(|l| l.contains("after other work")).context(format!("no eviction line in:\n{embed}"))?;
    for label in ["p50", "p99"] {
        let value = number_after(evicted, label)?;
        ensure!(value > 0.0 && value.is_finite(), "{label} is {value} in: {evicted}");
    }
    // Each measured level of `create` is followed by the CPU it cost per request.
    let create = printed.lines().find(|l| l.starts_with("create ")).context(format!("no create row in:\n{printed}"))?;
    let cpu = printed
        .lines()
        .skip_while(|l| *l != create)
        .nth(1)
        .filter(|l| l.trim_start().starts_with("cpu ms/request:"))
        .with_context(|| format!("no CPU line after the create row in:\n{printed}"))?;
    for process in ["runner", "postgres"] {
        let value = number_after(cpu, process)?;
        ensure!(value > 0.0 && value.is_finite(), "{process} is {value} in: {cpu}");
    }
    Ok(())
}

/// The embed-serve scenario: the local rates, then one row for the one level (2 clients), every
/// figure positive.
fn embeddings_server_row_is_whole(printed: &str) -> Result<()> {
    let head = printed.lines().find(|l| l.starts_with("embed-serve:")).context(format!(
        "no embed-serve in:
{printed}"
    ))?;
    ensure!(number_after(head, "embed-serve:")? == DOCUMENTS as f64, "{head}");
    ensure!(number_after(head, "one at a time")? > 0.0 && number_after(head, "128")? > 0.0, "{head}");
    let row = printed
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("clients "))
        .nth(1)
        .context(format!("no embed-serve row in:\n{printed}"))?;
    let numbers: Vec<f64> = row.split_whitespace().filter_map(|w| w.trim_end_matches('×').parse().ok()).collect();
    ensure!(numbers.len() == 6 && numbers[0] == 2.0, "{row}");
    ensure!(numbers.iter().all(|n| *n > 0.0 && n.is_finite()), "{row}");
    Ok(())
}

/// The recall scenario's table: a row per filter set, twelve searches each, recall between 0
/// and 1; over 64 documents every search finds ten without a filter, and none finds ten under
/// the narrowest filter (two regions, a category and a quarter), whose matches are fewer. Every
/// filter matches few of 64 documents, so every filtered search is sorted exactly and finds
/// the exact ten; the unfiltered ones go through the index.
fn recall_table_is_whole(printed: &str) -> Result<()> {
    let header =
        printed.lines().position(|l| l.starts_with("filters ")).context(format!("no recall table in:\n{printed}"))?;
    let rows: Vec<&str> = printed.lines().skip(header + 1).take(6).collect();
    let names = ["no filter", "one region", "one category", "from a date", "product and year", "two regions"];
    for (row, name) in rows.iter().zip(names) {
        ensure!(row.starts_with(name), "expected the {name:?} row, got {row:?}");
        let numbers: Vec<f64> = row[name.len()..].split_whitespace().filter_map(|w| w.parse().ok()).collect();
        let [searches, sorted, recall, lowest, short, ..] = numbers[..] else {
            anyhow::bail!("too few figures in {row:?}")
        };
        ensure!(searches == 12.0, "{row}");
        if name == "no filter" {
            ensure!(sorted == 0.0, "{row}");
        } else {
            ensure!(sorted == 12.0 && recall == 1.0, "{row}");
        }
        ensure!((0.0..=1.0).contains(&recall) && (0.0..=recall).contains(&lowest), "{row}");
        let expected_short = match name {
            "no filter" => 0.0,
            "two regions" => 12.0,
            _ => short,
        };
        ensure!(short == expected_short, "{row}");
    }
    let overall =
        printed.lines().find(|l| l.starts_with("recall@10 over all 72 searches: ")).context("no overall line")?;
    let recall = number_after(overall, "searches:")?;
    ensure!((0.0..=1.0).contains(&recall), "{overall}");
    Ok(())
}

/// The data-scale benchmark's seeding, at a small size (docs/benchmarks.md, "At scale"): the
/// calls are final, in the mix of outcomes, with the histories, executions and callbacks their
/// paths leave; a second run tops up to the new size instead of adding as much again; and the
/// read routes over the seeded data answer without an error.
#[tokio::test]
async fn bench_seeds_calls_and_executions_and_tops_them_up() -> Result<()> {
    let database = ScratchDatabase::create("gatehouse_seed").await?;
    let manifest = workspace_root().join("tests/fixtures/lifecycle.toml");
    let manifest = manifest.to_string_lossy();
    let seed = |calls: &'static str, executions: &'static str| {
        [
            "bench",
            "--manifest",
            &manifest,
            "--seed-calls",
            calls,
            "--seed-executions",
            executions,
            "--scenario",
            "calls,stats,executions",
            "--concurrency",
            "1",
            "--seconds",
            "0.5",
            "--no-floor",
        ]
        .map(str::to_owned)
    };
    let first = seed("400", "3000");
    let printed = gatehouse(&first.iter().map(String::as_str).collect::<Vec<_>>(), &database.url)?;
    ensure!(printed.contains("seed: 400 of 400 calls"), "{printed}");
    for scenario in ["calls", "stats", "executions"] {
        let row = printed
            .lines()
            .find(|l| l.split_whitespace().next() == Some(scenario))
            .with_context(|| format!("no {scenario} row in:\n{printed}"))?;
        let errors: u64 = row.split_whitespace().nth(3).unwrap_or_default().parse()?;
        ensure!(errors == 0, "{scenario} answered errors over the seeded data: {row}\n{printed}");
    }
    ensure!(number_after(&printed, "database:")? > 0.0, "{printed}");

    let db = gatehouse_tests::connect(&database.url).await?;
    let calls = db
        .query(
            "SELECT c.status, count(*), bool_and(c.status_history -> -1 ->> 'status' = c.status),
                    bool_and(tool_call_json(c) ->> 'tool_call_id' = c.tool_call_id),
                    sum((SELECT count(*) FROM tool_executions e WHERE e.tool_call_id = c.tool_call_id))::int8,
                    sum((SELECT count(*) FROM callback_attempts a WHERE a.tool_call_id = c.tool_call_id))::int8
               FROM tool_calls c WHERE c.tool_call_id LIKE 'tc_5eed%' GROUP BY c.status ORDER BY c.status",
            &[],
        )
        .await?;
    let mut total = 0;
    for row in &calls {
        let (status, count, ends_in_status, reads): (String, i64, bool, bool) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let (executions, callbacks): (i64, i64) = (row.get(4), row.get(5));
        total += count;
        ensure!(ends_in_status && reads, "{status}: histories or JSON do not match");
        // validate, then prepare (and execute when it went on); a callback at the checkpoint and
        // at the end for a call that ran.
        let (want_executions, want_callbacks) = match status.as_str() {
            "COMPLETED" => (3, 2),
            "FAILED" => (2, 1),
            "CANCELLED" | "EXPIRED" => (1, 0),
            other => anyhow::bail!("a seeded call is {other}, not final"),
        };
        ensure!(executions == want_executions * count, "{status}: {executions} executions for {count} calls");
        ensure!(callbacks == want_callbacks * count, "{status}: {callbacks} callbacks for {count} calls");
    }
    ensure!(total == 400 && calls.len() == 4, "{total} seeded calls in {} states", calls.len());
    let recent: i64 = db
        .query_one(
            "SELECT count(*) FROM tool_executions
              WHERE tool = 'fixture_action' AND started_at >= now() - interval '1 day'",
            &[],
        )
        .await?
        .get(0);
    ensure!(recent >= 3000, "{recent} executions in the last day");
    // Added to the stats' rollups, as the sweeper would have: none left waiting.
    let rolled = db
        .query_one(
            "SELECT (SELECT count(*) FROM tool_execution_inbox),
                    (SELECT sum(executions)::int8 FROM tool_execution_rollups WHERE period = 'hour'),
                    (SELECT count(*) FROM tool_executions)",
            &[],
        )
        .await?;
    let (waiting, rolled_up, recorded): (i64, i64, i64) = (rolled.get(0), rolled.get(1), rolled.get(2));
    ensure!(waiting == 0 && rolled_up == recorded, "{waiting} waiting, {rolled_up} rolled up of {recorded}");

    let second = seed("600", "3000");
    let printed = gatehouse(&second.iter().map(String::as_str).collect::<Vec<_>>(), &database.url)?;
    ensure!(printed.contains("seed: 600 of 600 calls") && !printed.contains("seed: 200 of"), "{printed}");
    let seeded: i64 =
        db.query_one("SELECT count(*) FROM tool_calls WHERE tool_call_id LIKE 'tc_5eed%'", &[]).await?.get(0);
    ensure!(seeded == 600, "{seeded} seeded calls after topping up to 600");

    // The sweeper's retention over the seeded month: final calls past ten days go, and the
    // history's week partitions that end before then (history past ten days and a week).
    let retain = [
        "bench",
        "--manifest",
        &manifest,
        "--scenario",
        "calls",
        "--concurrency",
        "1",
        "--seconds",
        "0.2",
        "--no-floor",
        "--retain-history-days",
        "10",
        "--retain-calls-days",
        "10",
    ];
    let printed = gatehouse(&retain, &database.url)?;
    ensure!(printed.contains("retention: partitions") && printed.contains("final calls forgotten"), "{printed}");
    let left = db
        .query_one(
            "SELECT (SELECT count(*) FROM tool_calls WHERE tool_call_id LIKE 'tc_5eed%'),
                    (SELECT count(*) FROM tool_calls WHERE tool_call_id LIKE 'tc_5eed%'
                        AND created_at < now() - interval '10 days'),
                    (SELECT count(*) FROM callback_attempts WHERE created_at < date_trunc('day', now(), 'UTC') - interval '17 days'),
                    (SELECT count(*) FROM history_partitions() WHERE upper <= date_trunc('day', now(), 'UTC') - interval '10 days')",
            &[],
        )
        .await?;
    let (kept, old_kept, old_attempts, old_partitions): (i64, i64, i64, i64) =
        (left.get(0), left.get(1), left.get(2), left.get(3));
    ensure!(
        old_kept == 0 && old_attempts == 0 && old_partitions == 0,
        "{old_kept} old calls, {old_attempts} old attempts, {old_partitions} old partitions left:\n{printed}"
    );
    ensure!(kept > 0 && kept < 600, "{kept} of 600 seeded calls kept over 30 days with 10 days' retention");
    Ok(())
}

/// A backlog of calls past their deadline, seeded under an application whose sweeper runs,
/// drains; the benchmark follows it down to nothing, and follows the expiry report each call
/// owes its relay (the benchmark's second relay) until every one arrived.
#[tokio::test]
async fn bench_follows_a_sweepers_backlog_until_it_is_drained() -> Result<()> {
    let database = ScratchDatabase::create("gatehouse_backlog").await?;
    // The status scenario's calls name the benchmark's own relay as their callback; the
    // backlog's calls name the other. Both on ports of the relays' range, which the runners
    // allow; the first is held while the second is chosen, so they differ.
    let held = gatehouse_tests::relay_listener().await?;
    let relay = held.local_addr()?.to_string();
    let reports = gatehouse_tests::free_relay_address()?.to_string();
    drop(held);
    let options = lifecycle_options(&[], &["--sweep-interval", "0.2"]);
    let app = App::start(database.serve(options)).await?;
    let base = app.runner.url("");
    let args = ["bench", "--url", &base, "--token", TOKEN, "--relay-listen", &relay, "--scenario", "status"];
    let backlog = ["--seed-expiring", "3000", "--backlog-reports", &reports];
    let args = [&args[..], &["--concurrency", "1", "--seconds", "0.5", "--no-floor"], &backlog[..]].concat();
    let printed = gatehouse(&args, &database.url)?;
    ensure!(printed.contains("backlog: 3000 waiting calls past their deadline"), "{printed}");
    ensure!(printed.contains("backlog: drained in"), "{printed}");
    ensure!(printed.contains("backlog: 3000 of 3000 expiry reports delivered"), "{printed}");
    let db = gatehouse_tests::connect(&database.url).await?;
    let expired: i64 = db
        .query_one("SELECT count(*) FROM tool_calls WHERE tool_call_id LIKE 'tc_5eef%' AND status = 'EXPIRED'", &[])
        .await?
        .get(0);
    ensure!(expired == 3000, "{expired} of the backlog's 3000 calls expired");
    Ok(())
}
