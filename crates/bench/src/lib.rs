//! The Gatehouse benchmark, and the relay that takes the application's callbacks.
//!
//! `gatehouse bench`: latency percentiles and throughput of the application's routes, over
//! real HTTP on loopback against a real database.
//!
//! Without `--url` it starts the application in-process exactly as `up` does (same database
//! choice, same migrations), seeds the data the routes read, measures, and shuts down. Its own
//! clients then run on a runtime of their own, so each level also prints the CPU per request
//! of the runner (this process less the clients' threads) and of PostgreSQL (see [`cpu`]).
//!
//! The lifecycle scenarios (`create`, `modify`, `cancel`, `status`, `flow`) need a tool: run
//! them on tests/fixtures/lifecycle.toml, the application plus the test-only fixture tool.
//! The `query` scenario runs the vector-search tool over the documents already ingested. The
//! `embed` scenario runs the embedding model alone, in this process, on those documents, and
//! prints its share of the machine's matrix rate measured in the same run.
//!
//! The program that runs it (the `gatehouse` CLI) parses [`BenchArgs`] and hands [`run`] a
//! [`Harness`]: how to start the application in-process, and the project's dev token, callback
//! secret, home folder and model folder. This crate may depend on `gatehouse-spin-host` (only
//! for its PostgreSQL connect), `gatehouse-embedded-pg` (to find pgbench),
//! `gatehouse-embeddings` (for `embed`) and `gatehouse-domain`, the HTTP client and server
//! crates and PostgreSQL; never on the CLI.
#![warn(unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use hdrhistogram::Histogram;

use gatehouse_spin_host::pg_connect;

pub mod cpu;
mod embed;
mod lifecycle;
mod query;
mod relay;

pub use relay::{Callback, LOCAL_RELAY, Relay};

/// What the benchmark needs from the program that runs it.
pub trait Harness {
    /// An application [`Harness::start`] started.
    type Running: Running;
    /// The API token of the application `start` starts, and the one used with `--url` when no
    /// `--token` is given.
    fn dev_token(&self) -> &str;
    /// The key the application signs its callbacks with, which the lifecycle scenarios' relay
    /// verifies.
    fn callback_secret(&self) -> &str;
    /// The project's folder, where pgbench is looked for (as the embedded PostgreSQL is).
    fn project_home(&self) -> Result<PathBuf>;
    /// Where the embedding model is, found as the application's runner finds it (for `embed`).
    fn model_dir(&self) -> Result<PathBuf>;
    /// Starts the application in-process, as `up` does, with no background sweeps.
    fn start(&self) -> impl Future<Output = Result<Self::Running>>;
}

/// An application started for the benchmark.
pub trait Running {
    /// Where it listens.
    fn address(&self) -> SocketAddr;
    /// Its database.
    fn database_url(&self) -> &str;
    /// Stops it, letting running guests finish.
    fn stop(self) -> impl Future<Output = Result<()>>;
}

#[derive(Args)]
pub struct BenchArgs {
    /// Measure an application that is already running instead of starting one (its database
    /// is DATABASE_URL, which the lifecycle scenarios and the pgbench floor need).
    #[arg(long)]
    pub url: Option<String>,
    /// Bearer token for `--url`; the in-process application uses the dev token.
    #[arg(long, env = "SPIN_VARIABLE_API_TOKEN")]
    pub token: Option<String>,
    /// Seconds of measurement per scenario and concurrency level.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Concurrent clients; repeat, or separate with commas, for several levels.
    #[arg(long = "concurrency", value_delimiter = ',', default_values_t = vec![1, 16])]
    pub concurrency: Vec<usize>,
    /// Scenarios to run, repeated or comma-separated: health, context, context-large, query (over the
    /// ingested documents), embed (the model alone on the first 1,000 ingested documents, beside the
    /// machine's matrix rate, and one query embedded alone), and (with the fixture tool: --manifest
    /// tests/fixtures/lifecycle.toml) create, modify, cancel, status, flow.
    #[arg(long = "scenario", value_delimiter = ',', default_values_t = vec!["health".to_string(), "context".to_string()])]
    pub scenarios: Vec<String>,
    /// A process serving the benchmark, as NAME=PID (repeatable): each level prints the CPU
    /// time it used per request, its child processes included (PostgreSQL's backends count
    /// towards the postmaster's PID). Without `--url` the runner and PostgreSQL are watched
    /// anyway.
    #[arg(long = "cpu", value_name = "NAME=PID", value_parser = cpu::parse_watched)]
    pub cpu: Vec<cpu::Watched>,
    /// Where the lifecycle scenarios' relay listens for the application's callbacks; the
    /// application must allow it (`callback_allowed_hosts`, `callback_host`). `gatehouse up`
    /// allows this default when none is configured.
    #[arg(long, default_value_t = relay::LOCAL_RELAY)]
    pub relay_listen: std::net::SocketAddr,
}

/// What a benchmark can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    Health,
    /// GET /voice-tools/context/:session of a session with 25 open and 20 settled calls.
    Context,
    /// The same route on a session with thousands of open and settled calls: the answer is
    /// bounded, so its size and time should match `context`.
    ContextLarge,
    /// POST /voice-tools/pending.
    Create,
    /// PATCH /voice-tools/modify/:id on PENDING calls, each request changing `to`.
    Modify,
    /// DELETE /voice-tools/cancel/:id, a fresh PENDING call per request.
    Cancel,
    /// GET /voice-tools/status/:id.
    Status,
    /// create → modify → confirm → checkpoint → resume proceed → COMPLETED, with a relay.
    Flow,
    /// query_vector_db: create, then confirm with `Prefer: wait` until COMPLETED.
    Query,
    /// The embedding model alone on the ingested documents, against the machine's matrix rate.
    Embed,
}

impl Scenario {
    const ALL: [Scenario; 10] = [
        Scenario::Health,
        Scenario::Context,
        Scenario::ContextLarge,
        Scenario::Create,
        Scenario::Modify,
        Scenario::Cancel,
        Scenario::Status,
        Scenario::Flow,
        Scenario::Query,
        Scenario::Embed,
    ];

    fn parse(name: &str) -> Result<Scenario> {
        match Scenario::ALL.into_iter().find(|s| s.name() == name.trim()) {
            Some(scenario) => Ok(scenario),
            None => {
                let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                bail!("unknown scenario {name:?}: expected one of {}", known.join(", "))
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scenario::Health => "health",
            Scenario::Context => "context",
            Scenario::ContextLarge => "context-large",
            Scenario::Create => "create",
            Scenario::Modify => "modify",
            Scenario::Cancel => "cancel",
            Scenario::Status => "status",
            Scenario::Flow => "flow",
            Scenario::Query => "query",
            Scenario::Embed => "embed",
        }
    }

    fn is_lifecycle(self) -> bool {
        !matches!(
            self,
            Scenario::Health | Scenario::Context | Scenario::ContextLarge | Scenario::Query | Scenario::Embed
        )
    }

    /// Measured over HTTP at each concurrency level; `embed` runs the model in this process.
    fn is_http(self) -> bool {
        self != Scenario::Embed
    }

    /// The steps of a multi-step unit of work, timed one by one.
    fn steps(self) -> &'static [&'static str] {
        match self {
            Scenario::Flow => &lifecycle::FLOW_STEPS,
            Scenario::Query => &query::QUERY_STEPS,
            _ => &[],
        }
    }

    /// The statements pgbench runs for this scenario's floor.
    fn floor(self) -> &'static [Statement] {
        match self {
            Scenario::Health => &[Statement::Health],
            Scenario::Context => &[Statement::Context],
            Scenario::ContextLarge => &[Statement::ContextLarge],
            Scenario::Create => &[Statement::Insert],
            Scenario::Modify => &[Statement::Modify],
            Scenario::Cancel => &[Statement::Cancel],
            Scenario::Status => &[Statement::Get],
            // A conversation's commits are measured against the cost of one insert.
            Scenario::Flow => &[Statement::Insert, Statement::Confirm],
            // A query commits a create and a confirm like any call; the search itself is a read.
            Scenario::Query => &[Statement::Insert, Statement::Confirm],
            // Measured against the machine's matrix rate instead.
            Scenario::Embed => &[],
        }
    }
}

/// A statement a route sends, run by pgbench for the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Statement {
    Health,
    Context,
    ContextLarge,
    Insert,
    Modify,
    Cancel,
    Confirm,
    Get,
}

impl Statement {
    /// In the order they run: the insert first, since its rate sizes the transitions' rows.
    const ALL: [Statement; 8] = [
        Statement::Health,
        Statement::Context,
        Statement::ContextLarge,
        Statement::Insert,
        Statement::Modify,
        Statement::Cancel,
        Statement::Confirm,
        Statement::Get,
    ];

    /// Named after the route that sends it.
    fn name(self) -> &'static str {
        match self {
            Statement::Health => "health",
            Statement::Context => "context",
            Statement::ContextLarge => "context-large",
            Statement::Insert => "create",
            Statement::Modify => "modify",
            Statement::Cancel => "cancel",
            Statement::Confirm => "confirm",
            Statement::Get => "status",
        }
    }
}

const BENCH_SESSION: &str = "bench-session";
const SMALL_SESSION_OPEN_CALLS: i64 = 25;
const SMALL_SESSION_SETTLED_CALLS: i64 = 20;
/// The session `context-large` reads: as a relay that looped would leave it.
const BENCH_LARGE_SESSION: &str = "bench-session-large";
const LARGE_SESSION_OPEN_CALLS: i64 = 6_000;
const LARGE_SESSION_SETTLED_CALLS: i64 = 2_000;
/// How long each level runs unmeasured first, to warm the connection pools and the components.
const WARMUP: Duration = Duration::from_millis(300);

/// The statements the routes send, so the database floor is measured on exactly them.
const HEALTH_SQL: &str = "SELECT 1";
const CONTEXT_SQL: &str = include_str!("../../store/src/sql/session_context_view.sql");

pub async fn run(args: BenchArgs, harness: &impl Harness) -> Result<()> {
    let scenarios = args.scenarios.iter().map(|name| Scenario::parse(name)).collect::<Result<Vec<_>>>()?;
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        bail!("--concurrency must be at least 1");
    }
    let model_dir = match scenarios.contains(&Scenario::Embed) {
        true => Some(harness.model_dir()?),
        false => None,
    };
    let mut setup = Setup {
        scenarios,
        base: String::new(),
        token: args.token.clone().unwrap_or_else(|| harness.dev_token().to_owned()),
        database_url: None,
        callback_secret: harness.callback_secret().to_owned(),
        project_home: harness.project_home()?,
        model_dir,
        watched: args.cpu.clone(),
        args,
    };
    let clients = clients_runtime()?;
    let outcome = match setup.args.url.clone() {
        Some(url) => {
            setup.base = url;
            setup.database_url = std::env::var("DATABASE_URL").ok();
            on_clients(&clients, setup).await
        }
        None => {
            let running = harness.start().await?;
            setup.base = format!("http://{}", running.address());
            setup.token = harness.dev_token().to_owned();
            setup.database_url = Some(running.database_url().to_owned());
            let measured = match in_process_watched(running.database_url()).await {
                Ok(mut watched) => {
                    watched.append(&mut setup.watched);
                    setup.watched = watched;
                    on_clients(&clients, setup).await
                }
                Err(e) => Err(e),
            };
            let stopped = running.stop().await;
            measured.and(stopped)
        }
    };
    // Whatever a failed run left on the clients' runtime (a relay, a connection) ends with it.
    clients.shutdown_background();
    outcome
}

/// What the benchmark's own work needs, owned, so that it can run on the clients' runtime.
struct Setup {
    args: BenchArgs,
    scenarios: Vec<Scenario>,
    /// The application's address, `http://host:port`.
    base: String,
    token: String,
    database_url: Option<String>,
    callback_secret: String,
    project_home: PathBuf,
    /// For `embed`: where the model is.
    model_dir: Option<PathBuf>,
    /// The processes whose CPU each level prints.
    watched: Vec<cpu::Watched>,
}

/// Longer than any benchmark run.
const CLIENT_THREAD_KEEP_ALIVE: Duration = Duration::from_secs(24 * 60 * 60);

/// The runtime the benchmark's clients, relay and database connections run on, apart from the
/// application's: its threads are named [`cpu::CLIENT_THREADS`], so the application's CPU is
/// this process's less theirs.
fn clients_runtime() -> Result<tokio::runtime::Runtime> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .thread_name(cpu::CLIENT_THREADS)
        // A thread that ends takes its CPU time out of the clients' sum but not out of the
        // process's, which would then count it as the runner's: the blocking threads (the
        // `embed` scenario's, pgbench's) stay until the runtime is shut down.
        .thread_keep_alive(CLIENT_THREAD_KEEP_ALIVE)
        .enable_all()
        .build()
        .context("starting the clients' runtime")
}

/// Runs the benchmark on the clients' runtime. The in-process application stays on the
/// runtime that started it, so neither does the other's work.
async fn on_clients(clients: &tokio::runtime::Runtime, setup: Setup) -> Result<()> {
    clients
        .spawn(async move {
            if setup.args.url.is_none()
                && let Some(database_url) = &setup.database_url
            {
                seed_context(database_url).await?;
            }
            bench(&setup).await
        })
        .await
        .context("the benchmark's task")?
}

/// The processes watched when the application runs in this process: the runner (this process
/// without the clients), and PostgreSQL if it runs on this machine.
async fn in_process_watched(database_url: &str) -> Result<Vec<cpu::Watched>> {
    let mut watched = vec![cpu::Watched { name: "runner".into(), target: cpu::Target::ThisProcessButClients }];
    watched.extend(cpu::postgres(database_url).await?);
    Ok(watched)
}

/// Measures the scenarios, then the database floor, then compares them.
async fn bench(setup: &Setup) -> Result<()> {
    let (scenarios, base, token) = (&setup.scenarios, setup.base.as_str(), setup.token.as_str());
    let database_url = setup.database_url.as_deref();
    if let Some(model_dir) = &setup.model_dir {
        let Some(database_url) = database_url else {
            bail!("the embed scenario reads the documents from the database: set DATABASE_URL with --url");
        };
        embed::run(database_url, model_dir, query::user_queries()).await?;
    }
    if !scenarios.iter().any(|s| s.is_http()) {
        return Ok(());
    }
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    let lifecycle = match (scenarios.iter().any(|s| s.is_lifecycle()), database_url) {
        (false, _) => None,
        (true, Some(database_url)) => {
            let listen = setup.args.relay_listen;
            Some(
                lifecycle::Lifecycle::prepare(database_url, &client, base, token, &setup.callback_secret, listen)
                    .await?,
            )
        }
        (true, None) => bail!("the lifecycle scenarios set up calls in the database: set DATABASE_URL with --url"),
    };
    let queries = match (scenarios.contains(&Scenario::Query), database_url) {
        (false, _) => None,
        (true, Some(database_url)) => Some(query::Queries::prepare(database_url, &client, base, token).await?),
        (true, None) => bail!("the query scenario reads and cleans up the database: set DATABASE_URL with --url"),
    };
    let outcome = measure_and_compare(setup, &client, lifecycle.as_ref(), queries.as_ref()).await;
    let cleaned = match &lifecycle {
        Some(lifecycle) => lifecycle.cleanup().await,
        None => Ok(()),
    };
    let queries_cleaned = match &queries {
        Some(queries) => queries.cleanup().await,
        None => Ok(()),
    };
    outcome.and(cleaned).and(queries_cleaned)
}

async fn measure_and_compare(
    setup: &Setup,
    client: &reqwest::Client,
    lifecycle: Option<&lifecycle::Lifecycle>,
    queries: Option<&Arc<query::Queries>>,
) -> Result<()> {
    let scenarios = &setup.scenarios;
    let commits = match (lifecycle, scenarios.contains(&Scenario::Flow)) {
        (Some(lifecycle), true) => Some(lifecycle.count_commits().await.context("counting a conversation's commits")?),
        _ => None,
    };
    let measured = measure_all(setup, client, lifecycle, queries).await?;
    let floors = match &setup.database_url {
        Some(database_url) => database_floor(setup, database_url, lifecycle).await?,
        None => Vec::new(),
    };
    compare(setup, &measured, &floors, commits.as_ref(), queries.map(|q| q.documents));
    print_context_answers(scenarios, client, &setup.base, &setup.token).await
}

/// The size of each context answer the scenarios read: the same, whatever the session holds.
async fn print_context_answers(
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

/// What a client does once: a request, or for `flow` a whole conversation.
type Work = Arc<dyn Fn(usize) -> Pin<Box<dyn Future<Output = Outcome> + Send>> + Send + Sync>;

/// How one unit of work went.
enum Outcome {
    /// Done, with the first problem if it failed, and the time of each step of a
    /// multi-step unit.
    Done { error: Option<String>, steps: Vec<Duration> },
    /// Nothing left to do: the calls this scenario uses up have run out.
    Exhausted,
}

impl Outcome {
    fn single(result: Result<()>) -> Outcome {
        Outcome::Done { error: result.err().map(|e| format!("{e:#}")), steps: Vec::new() }
    }
}

/// One scenario at one concurrency level.
struct Measured {
    scenario: Scenario,
    concurrency: usize,
    latency: Histogram<u64>,
    throughput: f64,
    /// For `query`: the component's own timings of the embedding and of the SQL statement.
    parts: Option<query::PartTimes>,
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    h.value_at_quantile(q) as f64 / 1000.0
}

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

async fn measure_all(
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
        for &concurrency in &args.concurrency {
            let work = match (scenario, lifecycle) {
                (Scenario::Health, _) => get_work(client, format!("{base}/health"), None),
                (Scenario::Context | Scenario::ContextLarge, _) => {
                    let session = if scenario == Scenario::Context { BENCH_SESSION } else { BENCH_LARGE_SESSION };
                    get_work(client, format!("{base}/voice-tools/context/{session}"), Some(token.to_owned()))
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

/// A GET, with the token if the route needs one.
fn get_work(client: &reqwest::Client, url: String, token: Option<String>) -> Work {
    let client = client.clone();
    let url = Arc::new(url);
    Arc::new(move |_| {
        let mut request = client.get(url.as_str());
        if let Some(token) = &token {
            request = request.bearer_auth(token);
        }
        Box::pin(async move {
            let outcome = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    match response.bytes().await {
                        Ok(_) if status.is_success() => Ok(()),
                        Ok(_) => Err(anyhow::anyhow!("HTTP {status}")),
                        Err(e) => Err(e.into()),
                    }
                }
                Err(e) => Err(e.into()),
            };
            Outcome::single(outcome)
        })
    })
}

struct LoadResult {
    latency: Histogram<u64>,
    /// For multi-step work, each step's latency (successful units only).
    steps: Vec<Histogram<u64>>,
    errors: u64,
    first_error: Option<String>,
    exhausted: bool,
}

fn histogram() -> Result<Histogram<u64>> {
    Ok(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?)
}

fn micros(duration: Duration) -> u64 {
    (duration.as_micros() as u64).max(1)
}

/// `concurrency` clients doing `work` back to back until `duration` has passed.
async fn run_load(work: &Work, concurrency: usize, duration: Duration, steps: usize) -> Result<LoadResult> {
    let deadline = Instant::now() + duration;
    let mut workers = Vec::with_capacity(concurrency);
    for worker in 0..concurrency {
        let work = work.clone();
        workers.push(tokio::spawn(async move {
            let mut result = LoadResult {
                latency: histogram()?,
                steps: (0..steps).map(|_| histogram()).collect::<Result<_>>()?,
                errors: 0,
                first_error: None,
                exhausted: false,
            };
            while Instant::now() < deadline {
                let sent = Instant::now();
                let outcome = work(worker).await;
                let elapsed = sent.elapsed();
                match outcome {
                    Outcome::Exhausted => {
                        result.exhausted = true;
                        break;
                    }
                    Outcome::Done { error: Some(error), .. } => {
                        result.latency.record(micros(elapsed))?;
                        result.errors += 1;
                        result.first_error.get_or_insert(error);
                    }
                    Outcome::Done { error: None, steps } => {
                        result.latency.record(micros(elapsed))?;
                        for (h, step) in result.steps.iter_mut().zip(steps) {
                            h.record(micros(step))?;
                        }
                    }
                }
            }
            anyhow::Ok(result)
        }));
    }
    let mut total = LoadResult {
        latency: histogram()?,
        steps: (0..steps).map(|_| histogram()).collect::<Result<_>>()?,
        errors: 0,
        first_error: None,
        exhausted: false,
    };
    for worker in workers {
        let result = worker.await??;
        total.latency.add(result.latency)?;
        for (sum, h) in total.steps.iter_mut().zip(result.steps) {
            sum.add(h)?;
        }
        total.errors += result.errors;
        total.exhausted |= result.exhausted;
        if total.first_error.is_none() {
            total.first_error = result.first_error;
        }
    }
    Ok(total)
}

/// The context route's statement with the values the store binds, for pgbench.
fn context_sql(session: &str) -> String {
    use gatehouse_domain::context::{COUNT_CAP, PENDING_LIMIT, RECENT_LIMIT};
    CONTEXT_SQL
        .replace("$1", &format!("'{session}'"))
        .replace("$2", &PENDING_LIMIT.to_string())
        .replace("$3", &RECENT_LIMIT.to_string())
        .replace("$4", &COUNT_CAP.to_string())
}

/// The two sessions the context scenarios read. Both answers are full (20 open and 10 settled
/// calls listed), so the scenarios differ only in how many calls the session holds.
async fn seed_context(database_url: &str) -> Result<()> {
    let (client, _driver) =
        pg_connect::connect(database_url).await.context("connecting to seed the benchmark sessions")?;
    let sessions = [
        (BENCH_SESSION, "a", SMALL_SESSION_OPEN_CALLS, SMALL_SESSION_SETTLED_CALLS),
        (BENCH_LARGE_SESSION, "b", LARGE_SESSION_OPEN_CALLS, LARGE_SESSION_SETTLED_CALLS),
    ];
    for (session, id_prefix, open, settled) in sessions {
        client.execute("DELETE FROM tool_calls WHERE session_id = $1", &[&session]).await?;
        // The newest `open` calls are PENDING, the older ones COMPLETED; ids are `tc_` + the
        // prefix + 11 hex digits, so the two sessions never share one.
        client
            .execute(
                "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status, expires_at, created_at)
                 SELECT 'tc_' || $2::text || lpad(to_hex(i), 11, '0'), $1, 'send_email', 'gmail',
                        jsonb_build_object('to', 'john.smith@gmail.com', 'subject', 'Report ' || i),
                        CASE WHEN i < $3::bigint THEN 'PENDING' ELSE 'COMPLETED' END,
                        now() + interval '1 hour', now() - make_interval(secs => i)
                   FROM generate_series(0, $3::bigint + $4::bigint - 1) AS i",
                &[&session, &id_prefix, &open, &settled],
            )
            .await?;
    }
    client.execute("ANALYZE tool_calls", &[]).await?;
    Ok(())
}

/// One pgbench run.
struct Floor {
    statement: Statement,
    concurrency: usize,
    tps: f64,
    avg_ms: f64,
}

/// Runs `pgbench` with the routes' own statements at the same concurrency, so the table shows
/// how much of a route's latency is the database and how much is Gatehouse.
async fn database_floor(
    setup: &Setup,
    database_url: &str,
    lifecycle: Option<&lifecycle::Lifecycle>,
) -> Result<Vec<Floor>> {
    let (args, scenarios) = (&setup.args, &setup.scenarios);
    let pgbench = match gatehouse_embedded_pg::PgInstall::locate(&setup.project_home) {
        Ok(install) => install.bin("pgbench"),
        Err(_) => {
            println!("\n(pgbench not found: run scripts/setup to compare with the database floor)");
            return Ok(Vec::new());
        }
    };
    // The call statements run on rows the lifecycle set-up makes; without it they are skipped.
    let statements: Vec<Statement> = Statement::ALL
        .into_iter()
        .filter(|st| scenarios.iter().any(|sc| sc.floor().contains(st)))
        .filter(|st| {
            lifecycle.is_some() || matches!(st, Statement::Health | Statement::Context | Statement::ContextLarge)
        })
        .collect();
    if statements.is_empty() {
        return Ok(Vec::new());
    }
    println!(
        "\ndatabase floor: pgbench, the same statement, prepared, same concurrency ({})",
        durability(database_url).await?
    );
    println!("{:<13} {:>5} {:>12} {:>12}", "statement", "conc", "tps", "avg ms");
    let scratch = tempfile_dir()?;
    let seconds = args.seconds.ceil() as u64;
    let mut floors = Vec::new();
    for statement in statements {
        for &concurrency in &args.concurrency {
            let script = match (statement, lifecycle) {
                (Statement::Health, _) => lifecycle::one_line(HEALTH_SQL),
                (Statement::Context, _) => lifecycle::one_line(&context_sql(BENCH_SESSION)),
                (Statement::ContextLarge, _) => lifecycle::one_line(&context_sql(BENCH_LARGE_SESSION)),
                (_, Some(lifecycle)) => {
                    let insert_tps = floors
                        .iter()
                        .find(|f: &&Floor| f.statement == Statement::Insert && f.concurrency == concurrency)
                        .map(|f| f.tps);
                    let script = lifecycle.floor_script(statement, concurrency, seconds, insert_tps).await?;
                    let floor =
                        pgbench_run(&pgbench, &scratch, &script.text, concurrency, seconds, database_url).await?;
                    let note =
                        if lifecycle.floor_had_rows(&script).await? { "" } else { "  (ran out of rows: overstated)" };
                    print_floor(statement, concurrency, floor, note);
                    floors.push(Floor { statement, concurrency, tps: floor.0, avg_ms: floor.1 });
                    continue;
                }
                (_, None) => continue,
            };
            let floor = pgbench_run(&pgbench, &scratch, &script, concurrency, seconds, database_url).await?;
            print_floor(statement, concurrency, floor, "");
            floors.push(Floor { statement, concurrency, tps: floor.0, avg_ms: floor.1 });
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(floors)
}

fn print_floor(statement: Statement, concurrency: usize, (tps, avg_ms): (f64, f64), note: &str) {
    println!("{:<13} {:>5} {:>12.0} {:>12.3}{note}", statement.name(), concurrency, tps, avg_ms);
}

/// The server's durability settings, which a write floor depends on.
async fn durability(database_url: &str) -> Result<String> {
    let (client, _driver) = pg_connect::connect(database_url).await?;
    let mut settings = Vec::new();
    for name in ["fsync", "synchronous_commit"] {
        let value: String = client.query_one(&format!("SHOW {name}"), &[]).await?.get(0);
        settings.push(format!("{name}={value}"));
    }
    Ok(settings.join(", "))
}

/// The URL with its password taken out, and the password, decoded.
fn without_password(database_url: &str) -> Result<(String, Option<String>)> {
    let mut url = url::Url::parse(database_url).context("DATABASE_URL is not a URL")?;
    let password = url.password().map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy().into_owned());
    let _ = url.set_password(None);
    Ok((url.to_string(), password))
}

/// Runs one pgbench script; answers (tps, average latency in ms).
async fn pgbench_run(
    pgbench: &std::path::Path,
    scratch: &std::path::Path,
    script: &str,
    concurrency: usize,
    seconds: u64,
    database_url: &str,
) -> Result<(f64, f64)> {
    let path = scratch.join("statement.sql");
    std::fs::write(&path, script)?;
    // The password goes in the environment, where other users cannot read it (`ps` shows the
    // arguments).
    let (database_url, password) = without_password(database_url)?;
    let mut command = tokio::process::Command::new(pgbench);
    command
        .args(["-n", "-M", "prepared", "-D", "k=0", "-f"])
        .arg(&path)
        .args(["-c", &concurrency.to_string(), "-j", &concurrency.min(4).to_string()])
        .args(["-T", &seconds.to_string()])
        .arg(&database_url);
    if let Some(password) = password {
        command.env("PGPASSWORD", password);
    }
    let output = command.output().await.context("running pgbench")?;
    let text = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("pgbench failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let field = |prefix: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    Ok((field("tps = "), field("latency average = ")))
}

/// Route against floor, as SPEC §11 states its targets.
fn compare(
    setup: &Setup,
    measured: &[Measured],
    floors: &[Floor],
    commits: Option<&lifecycle::Commits>,
    documents: Option<i64>,
) {
    let (args, scenarios) = (&setup.args, &setup.scenarios);
    let (Some(&low), Some(&high)) = (args.concurrency.iter().min(), args.concurrency.iter().max()) else {
        return;
    };
    let route = |scenario: Scenario, concurrency: usize| {
        measured.iter().find(|m| m.scenario == scenario && m.concurrency == concurrency)
    };
    let floor = |statement: Statement, concurrency: usize| {
        floors.iter().find(|f| f.statement == statement && f.concurrency == concurrency)
    };
    let writes: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Create | Scenario::Modify | Scenario::Cancel))
        .collect();
    if !writes.is_empty() && !floors.is_empty() {
        println!(
            "\nwrites against the floor (SPEC §11: p50 ≤ floor + 1 ms; at {high} clients ≥ 80% of pgbench's rate)"
        );
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
            let (Some(slow), Some(fast), Some(floor_low), Some(floor_high)) =
                (route(scenario, low), route(scenario, high), floor(statement, low), floor(statement, high))
            else {
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
    let reads: Vec<Scenario> = scenarios
        .iter()
        .copied()
        .filter(|s| matches!(s, Scenario::Status | Scenario::Context | Scenario::ContextLarge))
        .collect();
    if !reads.is_empty() {
        println!("\nreads at {low} client(s) (SPEC §11: p50 ≤ 1 ms, p99 ≤ 5 ms)");
        for scenario in reads {
            if let Some(m) = route(scenario, low) {
                println!(
                    "{:<13} p50 {:.3} ms, p99 {:.3} ms",
                    scenario.name(),
                    ms(&m.latency, 0.5),
                    ms(&m.latency, 0.99)
                );
            }
        }
    }
    if let Some(m) = route(Scenario::Query, low) {
        let over = documents.map_or_else(String::new, |n| format!(" over {n} documents"));
        println!("\nquery_vector_db at {low} client(s){over} (SPEC §11: p50 ≤ 25 ms including the embedding)");
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
    if let Some(commits) = commits.filter(|_| scenarios.contains(&Scenario::Flow)) {
        let steps: Vec<String> =
            lifecycle::FLOW_STEPS.iter().zip(&commits.per_step).map(|(name, n)| format!("{name} {n}")).collect();
        let callbacks: Vec<String> = commits.callbacks.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
        println!(
            "\nflow: {} commits per conversation ({}); callbacks to the relay: {}",
            commits.total(),
            steps.join(", "),
            if callbacks.is_empty() { "none".to_owned() } else { callbacks.join(", ") }
        );
        println!("Gatehouse time = p50 - commits x the insert floor's latency (SPEC §11: ≤ 30 ms)");
        println!(
            "{:<10} {:>5} {:>10} {:>10} {:>16} {:>15}",
            "scenario", "conc", "p50 ms", "floor ms", "commits x floor", "Gatehouse ms"
        );
        for &concurrency in &args.concurrency {
            let (Some(m), Some(f)) = (route(Scenario::Flow, concurrency), floor(Statement::Insert, concurrency)) else {
                continue;
            };
            let p50 = ms(&m.latency, 0.5);
            let commit_time = commits.total() as f64 * f.avg_ms;
            println!(
                "{:<10} {:>5} {:>10.3} {:>10.3} {:>16.3} {:>15.3}",
                "flow",
                concurrency,
                p50,
                f.avg_ms,
                commit_time,
                p50 - commit_time
            );
        }
    }
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_by_name() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::parse(scenario.name()).unwrap(), scenario);
        }
        assert!(Scenario::parse("confirm").is_err());
    }

    #[test]
    fn every_http_scenario_has_a_floor() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.floor().is_empty(), !scenario.is_http(), "{scenario:?}");
            assert!(scenario.floor().iter().all(|st| Statement::ALL.contains(st)));
        }
    }
}
