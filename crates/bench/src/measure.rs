//! Measuring: each HTTP scenario at each concurrency level, one table row per level, with the
//! CPU it cost and the time of each step.
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use hdrhistogram::Histogram;

use crate::load::{WARMUP, get_work, run_load};
use crate::scenario::Scenario;
use crate::sessions::{BENCH_LARGE_SESSION, BENCH_SESSION};
use crate::setup::Setup;
use crate::timing::ms;
use crate::{cpu, lifecycle, query, seed};

/// One scenario at one concurrency level.
pub(crate) struct Measured {
    pub(crate) scenario: Scenario,
    pub(crate) concurrency: usize,
    pub(crate) latency: Histogram<u64>,
    pub(crate) throughput: f64,
    /// For `query`: the component's own timings of the embedding and of the SQL statement.
    pub(crate) parts: Option<query::PartTimes>,
}

/// One row of the table: a level, or one of its steps or parts (those without errors and
/// throughput).
fn print_row(name: &str, concurrency: usize, h: &Histogram<u64>, errors: Option<u64>, throughput: Option<f64>) {
    let errors = errors.map_or_else(String::new, |e| e.to_string());
    let throughput = throughput.map_or_else(String::new, |t| format!("{t:.0}"));
    println!(
        "{:<13} {:>5} {:>9} {:>7} {:>12} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
        name,
        concurrency,
        h.len(),
        errors,
        throughput,
        ms(h, 0.50),
        ms(h, 0.95),
        ms(h, 0.99),
        h.max() as f64 / 1000.0
    );
}

/// Measures each HTTP scenario at each concurrency level, printing a row per level as it goes.
pub(crate) async fn measure_all(
    setup: &Setup,
    client: &reqwest::Client,
    lifecycle: Option<&lifecycle::Lifecycle>,
    queries: Option<&Arc<query::Queries>>,
) -> Result<Vec<Measured>> {
    println!(
        "{:<13} {:>5} {:>9} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8}",
        "scenario", "conc", "requests", "errors", "throughput/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    let (args, base, token) = (&setup.args, setup.base.as_str(), setup.token.as_str());
    let mut measured = Vec::new();
    for &scenario in setup.scenarios.iter().filter(|s| s.is_http()) {
        if let (Scenario::Stats, Some(database_url)) = (scenario, &setup.database_url) {
            // What earlier scenarios recorded, added to the rollups as the sweeper would have.
            seed::roll_up_at(database_url).await?;
        }
        for &concurrency in &args.concurrency {
            let work = match (scenario, lifecycle) {
                (Scenario::Health, _) => get_work(client, format!("{base}/health"), None),
                (Scenario::Context | Scenario::ContextLarge, _) => {
                    let session = if scenario == Scenario::Context { BENCH_SESSION } else { BENCH_LARGE_SESSION };
                    get_work(client, format!("{base}/voice-tools/context/{session}"), Some(token.to_owned()))
                }
                (Scenario::Calls, _) => get_work(client, format!("{base}/voice-tools/calls"), Some(token.to_owned())),
                (Scenario::Stats | Scenario::Executions, _) => {
                    let what = if scenario == Scenario::Stats { "stats" } else { "executions" };
                    let url = format!("{base}/voice-tools/tools/{}/{what}", lifecycle::FUNCTION);
                    get_work(client, url, Some(token.to_owned()))
                }
                (Scenario::Query, _) => match queries {
                    Some(queries) => queries.work(),
                    None => bail!("query needs its set-up"),
                },
                (_, Some(lifecycle)) => lifecycle.work(scenario, concurrency, args.seconds).await?,
                (_, None) => bail!("{} needs the lifecycle set-up", scenario.name()),
            };
            let steps = scenario.steps().len();
            run_load(&work, concurrency, WARMUP, steps).await?;
            // What the warm-up queries timed is not part of the measurement.
            let take_parts = || queries.filter(|_| scenario == Scenario::Query).map(|q| q.take_parts());
            take_parts().transpose()?;
            let cpu_before = cpu::sample(&setup.watched)?;
            let started = Instant::now();
            let result = run_load(&work, concurrency, Duration::from_secs_f64(args.seconds), steps).await?;
            let elapsed = started.elapsed();
            let cpu_after = cpu::sample(&setup.watched)?;
            let throughput = result.latency.len() as f64 / elapsed.as_secs_f64();
            print_row(scenario.name(), concurrency, &result.latency, Some(result.errors), Some(throughput));
            cpu::print(&setup.watched, &cpu_before, &cpu_after, result.latency.len(), elapsed);
            for (name, h) in scenario.steps().iter().zip(&result.steps) {
                print_row(&format!("  {name}"), concurrency, h, None, None);
            }
            let parts = take_parts().transpose()?;
            if let Some(parts) = &parts {
                print_row("  embedding", concurrency, &parts.embedding, None, None);
                print_row("  sql", concurrency, &parts.sql, None, None);
            }
            if let Some(error) = &result.first_error {
                println!("  first error: {error}");
            }
            if result.exhausted {
                println!("  (ran out of pre-created calls: throughput is over the time they lasted)");
            }
            measured.push(Measured { scenario, concurrency, latency: result.latency, throughput, parts });
        }
    }
    Ok(measured)
}
