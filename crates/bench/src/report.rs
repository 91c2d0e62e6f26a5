//! The report after the measurements: each route against its database floor, as the targets are
//! stated (docs/architecture.md, "Performance targets"), and the size of the context answers.
use anyhow::Result;

use crate::floor::Floor;
use crate::lifecycle::Commits;
use crate::measure::Measured;
use crate::scenario::{FLOW_STEPS, Scenario, Statement};
use crate::sessions::{BENCH_LARGE_SESSION, BENCH_SESSION};
use crate::setup::Setup;
use crate::timing::ms;

/// Route against floor, section by section: the writes, the reads, the vector query and the
/// conversation. A section is left out when its scenarios did not run.
pub(crate) fn compare(
    setup: &Setup,
    measured: &[Measured],
    floors: &[Floor],
    commits: Option<&Commits>,
    documents: Option<i64>,
) {
    let concurrency = &setup.args.concurrency;
    let (Some(&low), Some(&high)) = (concurrency.iter().min(), concurrency.iter().max()) else {
        return;
    };
    let results = Results { measured, floors, low, high };
    let scenarios = &setup.scenarios;
    compare_writes(&results, scenarios);
    compare_reads(&results, scenarios);
    compare_query(&results, documents);
    if let Some(commits) = commits.filter(|_| scenarios.contains(&Scenario::Flow)) {
        compare_flow(&results, commits, concurrency);
    }
}

/// The measurements and floors, looked up by scenario (or statement) and level, and the lowest
/// and highest levels, which the targets are stated at.
struct Results<'a> {
    measured: &'a [Measured],
    floors: &'a [Floor],
    low: usize,
    high: usize,
}

impl Results<'_> {
    fn route(&self, scenario: Scenario, concurrency: usize) -> Option<&Measured> {
        self.measured.iter().find(|m| m.scenario == scenario && m.concurrency == concurrency)
    }

    fn floor(&self, statement: Statement, concurrency: usize) -> Option<&Floor> {
        self.floors.iter().find(|f| f.statement == statement && f.concurrency == concurrency)
    }
}

/// Each write's median at the lowest level over its statement's floor, and its rate at the
/// highest level against pgbench's.
fn compare_writes(results: &Results<'_>, scenarios: &[Scenario]) {
    let Results { low, high, .. } = *results;
    let writes: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Create | Scenario::Modify | Scenario::Cancel))
        .collect();
    if writes.is_empty() || results.floors.is_empty() {
        return;
    }
    println!("\nwrites against the floor (target: p50 ≤ floor + 1 ms; at {high} clients ≥ 80% of pgbench's rate)");
    println!(
        "{:<10} {:>10} {:>11} {:>11} {:>11} {:>13} {:>6}",
        "scenario",
        format!("p50@{low} ms"),
        format!("floor@{low} ms"),
        "overhead ms",
        format!("route/s@{high}"),
        format!("pgbench/s@{high}"),
        "ratio"
    );
    for scenario in writes {
        let statement = scenario.floor()[0];
        let (Some(slow), Some(fast), Some(floor_low), Some(floor_high)) = (
            results.route(scenario, low),
            results.route(scenario, high),
            results.floor(statement, low),
            results.floor(statement, high),
        ) else {
            continue;
        };
        let p50 = ms(&slow.latency, 0.5);
        println!(
            "{:<10} {:>10.3} {:>11.3} {:>11.3} {:>11.0} {:>13.0} {:>5.0}%",
            scenario.name(),
            p50,
            floor_low.avg_ms,
            p50 - floor_low.avg_ms,
            fast.throughput,
            floor_high.tps,
            100.0 * fast.throughput / floor_high.tps
        );
    }
}

/// Each read's median and 99th percentile at the lowest level.
fn compare_reads(results: &Results<'_>, scenarios: &[Scenario]) {
    let low = results.low;
    let reads: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Status | Scenario::Context | Scenario::ContextLarge))
        .collect();
    if reads.is_empty() {
        return;
    }
    println!("\nreads at {low} client(s) (target: p50 ≤ 1 ms, p99 ≤ 5 ms)");
    for scenario in reads {
        if let Some(m) = results.route(scenario, low) {
            println!("{:<13} p50 {:.3} ms, p99 {:.3} ms", scenario.name(), ms(&m.latency, 0.5), ms(&m.latency, 0.99));
        }
    }
}

/// The vector query at the lowest level, whole and in the parts the component timed.
fn compare_query(results: &Results<'_>, documents: Option<i64>) {
    let low = results.low;
    let Some(m) = results.route(Scenario::Query, low) else {
        return;
    };
    let over = documents.map_or_else(String::new, |n| format!(" over {n} documents"));
    println!("\nquery_vector_db at {low} client(s){over} (target: p50 ≤ 25 ms including the embedding)");
    println!(
        "{:<10} p50 {:.3} ms, p95 {:.3} ms (create + confirm)",
        "route",
        ms(&m.latency, 0.5),
        ms(&m.latency, 0.95)
    );
    if let Some(parts) = &m.parts {
        for (name, h) in [("embedding", &parts.embedding), ("sql", &parts.sql)] {
            println!("{name:<10} p50 {:.3} ms, p95 {:.3} ms (timed by the component)", ms(h, 0.5), ms(h, 0.95));
        }
    }
}

/// A conversation's commits, and at each level the time Gatehouse adds: the median less the
/// commits at the insert floor's latency.
fn compare_flow(results: &Results<'_>, commits: &Commits, concurrency: &[usize]) {
    let steps: Vec<String> = FLOW_STEPS.iter().zip(&commits.per_step).map(|(name, n)| format!("{name} {n}")).collect();
    let callbacks: Vec<String> = commits.callbacks.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    println!(
        "\nflow: {} commits per conversation ({}); callbacks to the relay: {}",
        commits.total(),
        steps.join(", "),
        if callbacks.is_empty() { "none".to_owned() } else { callbacks.join(", ") }
    );
    println!("Gatehouse time = p50 - commits x the insert floor's latency (target: ≤ 30 ms)");
    println!(
        "{:<10} {:>5} {:>10} {:>10} {:>16} {:>15}",
        "scenario", "conc", "p50 ms", "floor ms", "commits x floor", "Gatehouse ms"
    );
    for &level in concurrency {
        let (Some(m), Some(f)) = (results.route(Scenario::Flow, level), results.floor(Statement::Insert, level)) else {
            continue;
        };
        let p50 = ms(&m.latency, 0.5);
        let commit_time = commits.total() as f64 * f.avg_ms;
        println!(
            "{:<10} {:>5} {:>10.3} {:>10.3} {:>16.3} {:>15.3}",
            "flow",
            level,
            p50,
            f.avg_ms,
            commit_time,
            p50 - commit_time
        );
    }
}

/// The size of each context answer the scenarios read: the same, whatever the session holds.
pub(crate) async fn print_context_answers(
    scenarios: &[Scenario],
    client: &reqwest::Client,
    base: &str,
    token: &str,
) -> Result<()> {
    for &scenario in scenarios {
        let session = match scenario {
            Scenario::Context => BENCH_SESSION,
            Scenario::ContextLarge => BENCH_LARGE_SESSION,
            _ => continue,
        };
        let answer = client.get(format!("{base}/voice-tools/context/{session}")).bearer_auth(token).send().await?;
        let body = answer.bytes().await?;
        let view: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let listed = |list: &str| view[list].as_array().map_or(0, Vec::len);
        println!(
            "{:<13} answer {} bytes: {} of {} open calls listed, {} of {} settled (totals capped at {})",
            scenario.name(),
            body.len(),
            listed("pending"),
            view["pending_total"],
            listed("recent"),
            view["recent_total"],
            gatehouse_domain::context::COUNT_CAP
        );
    }
    Ok(())
}
