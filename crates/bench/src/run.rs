//! One benchmark run from start to end: the application started (or reached at `--url`), the
//! sessions seeded, the scenarios measured on a runtime of the clients' own, the floor, the
//! report, and everything cleaned up.
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::args::BenchArgs;
use crate::harness::{Harness, Running};
use crate::scenario::Scenario;
use crate::setup::Setup;
use crate::{cpu, embed, embed_serve, floor, lifecycle, measure, query, recall, relay, report, seed, sessions};

/// Runs the scenarios `args` names, on the application `harness` starts, or on the one at
/// `--url`; prints the tables as it goes.
pub async fn run(args: BenchArgs, harness: &impl Harness) -> Result<()> {
    let scenarios = args.scenarios.iter().map(|name| Scenario::parse(name)).collect::<Result<Vec<_>>>()?;
    if args.concurrency.is_empty() || args.concurrency.contains(&0) {
        bail!("--concurrency must be at least 1");
    }
    let model_dir = match scenarios.iter().any(|s| s.needs_model()) {
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
        // No `?` while the clients' runtime is held: dropped here, inside this task, it would
        // panic instead of saying what failed.
        None => match harness.start().await {
            Err(e) => Err(e),
            Ok(running) => {
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
        },
    };
    // Whatever a failed run left on the clients' runtime (a relay, a connection) ends with it.
    clients.shutdown_background();
    outcome
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
                sessions::seed_context(database_url).await?;
            }
            let args = &setup.args;
            if args.seed_calls > 0 || args.seed_executions > 0 {
                let plan =
                    seed::SeedPlan { calls: args.seed_calls, executions: args.seed_executions, days: args.seed_days };
                seed::seed(database_to_write(&setup, "seeding")?, &plan).await?;
            }
            let backlog = match args.seed_expiring {
                0 => None,
                // The application this benchmark starts runs no sweeper: nothing would drain it.
                _ if args.url.is_none() => bail!("--seed-expiring needs an application whose sweeper runs: --url"),
                calls => {
                    let relay = match args.backlog_reports {
                        Some(listen) => Some(relay::Relay::start(&setup.callback_secret, listen).await?),
                        None => None,
                    };
                    Some(seed::Backlog::seed(database_to_write(&setup, "seeding")?, calls, relay).await?)
                }
            };
            if let Some(history_days) = args.retain_history_days {
                let database_url = database_to_write(&setup, "retention")?;
                seed::apply_retention(database_url, history_days, args.retain_calls_days).await?;
            }
            bench(&setup).await?;
            match backlog {
                Some(backlog) => backlog.drained().await,
                None => Ok(()),
            }
        })
        .await
        .context("the benchmark's task")?
}

/// The database a step that writes to it (`what`) uses: with --url, only DATABASE_URL names it.
fn database_to_write<'a>(setup: &'a Setup, what: &str) -> Result<&'a str> {
    setup.database_url.as_deref().with_context(|| format!("{what} writes to the database: set DATABASE_URL with --url"))
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
            bail!(
                "the embed, embed-serve and recall scenarios read the documents from the database: set DATABASE_URL with --url"
            );
        };
        if scenarios.contains(&Scenario::Embed) {
            embed::run(database_url, model_dir, query::user_queries()).await?;
        }
        if scenarios.contains(&Scenario::EmbedServe) {
            embed_serve::run(database_url, model_dir, &setup.args.concurrency, setup.args.seconds).await?;
        }
        if scenarios.contains(&Scenario::Recall) {
            recall::run(database_url, model_dir).await?;
        }
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
    let measured = measure::measure_all(setup, client, lifecycle, queries).await?;
    let floors = match &setup.database_url {
        Some(database_url) if !setup.args.no_floor => floor::database_floor(setup, database_url, lifecycle).await?,
        _ => Vec::new(),
    };
    report::compare(setup, &measured, &floors, commits.as_ref(), queries.map(|q| q.documents));
    report::print_context_answers(scenarios, client, &setup.base, &setup.token).await
}
