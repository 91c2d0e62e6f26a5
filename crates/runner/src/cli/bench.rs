//! `gatehouse bench`: latency percentiles and throughput of the application's routes, over
//! real HTTP on loopback against a real database.
//!
//! Without `--url` it starts the application in-process exactly as `up` does (same database
//! choice, same migrations), seeds the data the routes read, measures, and shuts down.
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use hdrhistogram::Histogram;

use super::up::{self, UpArgs};

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub app: super::AppArgs,
    /// Measure an application that is already running instead of starting one.
    #[arg(long)]
    pub url: Option<String>,
    /// Bearer token for `--url`; the in-process application uses the dev token.
    #[arg(long, env = "SPIN_VARIABLE_API_TOKEN")]
    pub token: Option<String>,
    /// Seconds of measurement per scenario and concurrency level.
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Concurrent clients; repeat for several levels.
    #[arg(long = "concurrency", default_values_t = vec![1, 16])]
    pub concurrency: Vec<usize>,
    /// Scenarios to run: health, context.
    #[arg(long = "scenario", default_values_t = vec!["health".to_string(), "context".to_string()])]
    pub scenarios: Vec<String>,
}

const BENCH_SESSION: &str = "bench-session";

/// The statements the routes send, so the database floor is measured on exactly them.
const HEALTH_SQL: &str = "SELECT 1";
const CONTEXT_SQL: &str = include_str!("../../../store/src/sql/session_context_view.sql");

pub async fn run(args: BenchArgs) -> Result<()> {
    match args.url.clone() {
        Some(url) => {
            let token = args.token.clone().unwrap_or_else(|| up::DEV_TOKEN.to_owned());
            measure_all(&args, &url, &token).await?;
            match std::env::var("DATABASE_URL") {
                Ok(database_url) => database_floor(&args, &database_url).await,
                Err(_) => Ok(()),
            }
        }
        None => {
            let up_args = UpArgs {
                app: args.app.clone(),
                listen: "127.0.0.1:0".parse()?,
                variables: vec![format!("api_token={}", up::DEV_TOKEN)],
                max_body_bytes: 1 << 20,
                pg_pool_size: 32,
                // No background sweeps: the measured latencies are the routes' own.
                sweep_interval: std::time::Duration::ZERO,
                sweep_component: "sweeper".into(),
            };
            let running = up::start(&up_args).await?;
            seed_context(running.database_url()).await?;
            let url = format!("http://{}", running.address);
            let measured = measure_all(&args, &url, up::DEV_TOKEN).await;
            let floor = database_floor(&args, running.database_url()).await;
            running.stop().await?;
            measured.and(floor)
        }
    }
}

async fn measure_all(args: &BenchArgs, base: &str, token: &str) -> Result<()> {
    let client = reqwest::Client::builder().pool_max_idle_per_host(256).build()?;
    println!(
        "{:<10} {:>5} {:>9} {:>7} {:>12} {:>8} {:>8} {:>8} {:>8}",
        "scenario", "conc", "requests", "errors", "throughput/s", "p50 ms", "p95 ms", "p99 ms", "max ms"
    );
    for scenario in &args.scenarios {
        let (path, auth) = match scenario.as_str() {
            "health" => ("/health".to_owned(), false),
            "context" => (format!("/voice-tools/context/{BENCH_SESSION}"), true),
            other => bail!("unknown scenario {other:?}: expected health or context"),
        };
        let url = Arc::new(format!("{base}{path}"));
        for &concurrency in &args.concurrency {
            // Warm the connection pool and the components before measuring.
            run_load(&client, &url, auth.then_some(token), concurrency, Duration::from_millis(300)).await?;
            let started = Instant::now();
            let result =
                run_load(&client, &url, auth.then_some(token), concurrency, Duration::from_secs_f64(args.seconds))
                    .await?;
            let elapsed = started.elapsed().as_secs_f64();
            let h = &result.latency;
            let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
            println!(
                "{:<10} {:>5} {:>9} {:>7} {:>12.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3}",
                scenario,
                concurrency,
                h.len(),
                result.errors,
                h.len() as f64 / elapsed,
                ms(0.50),
                ms(0.95),
                ms(0.99),
                h.max() as f64 / 1000.0
            );
        }
    }
    Ok(())
}

struct LoadResult {
    latency: Histogram<u64>,
    errors: u64,
}

async fn run_load(
    client: &reqwest::Client,
    url: &Arc<String>,
    token: Option<&str>,
    concurrency: usize,
    duration: Duration,
) -> Result<LoadResult> {
    let deadline = Instant::now() + duration;
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let client = client.clone();
        let url = url.clone();
        let token = token.map(str::to_owned);
        workers.push(tokio::spawn(async move {
            let mut latency = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
            let mut errors = 0u64;
            while Instant::now() < deadline {
                let mut request = client.get(url.as_str());
                if let Some(token) = &token {
                    request = request.bearer_auth(token);
                }
                let sent = Instant::now();
                let ok = match request.send().await {
                    Ok(response) => response.status().is_success() && response.bytes().await.is_ok(),
                    Err(_) => false,
                };
                latency.record(sent.elapsed().as_micros().max(1) as u64)?;
                if !ok {
                    errors += 1;
                }
            }
            anyhow::Ok((latency, errors))
        }));
    }
    let mut total = LoadResult { latency: Histogram::new_with_bounds(1, 60_000_000, 3)?, errors: 0 };
    for worker in workers {
        let (latency, errors) = worker.await??;
        total.latency.add(latency)?;
        total.errors += errors;
    }
    Ok(total)
}

/// A session with 5 open and 20 settled calls, the shape the context route reads.
async fn seed_context(database_url: &str) -> Result<()> {
    let (client, connection) = tokio_postgres::connect(database_url, tokio_postgres::NoTls)
        .await
        .context("connecting to seed the benchmark session")?;
    tokio::spawn(connection);
    client.execute("DELETE FROM tool_calls WHERE session_id = $1", &[&BENCH_SESSION]).await?;
    for i in 0..25i64 {
        let status = if i < 5 { "PENDING" } else { "COMPLETED" };
        client
            .execute(
                "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status, expires_at, created_at)
                 VALUES ($1, $2, 'send_email', 'gmail', $3, $4, now() + interval '1 hour', now() - make_interval(secs => $5))",
                &[
                    &format!("tc_{i:012x}"),
                    &BENCH_SESSION,
                    &serde_json::json!({"to": "john.smith@gmail.com", "subject": format!("Report {i}")}),
                    &status,
                    &(i as f64),
                ],
            )
            .await?;
    }
    Ok(())
}

/// Runs `pgbench` with the routes' own statements at the same concurrency, so the table shows
/// how much of a route's latency is the database and how much is Gatehouse.
async fn database_floor(args: &BenchArgs, database_url: &str) -> Result<()> {
    let root = args.app.project_root()?;
    let pgbench = match gatehouse_embedded_pg::PgInstall::locate(&root) {
        Ok(install) => install.bin("pgbench"),
        Err(_) => {
            println!("\n(pgbench not found: run scripts/setup to compare with the database floor)");
            return Ok(());
        }
    };
    println!("\ndatabase floor: pgbench, the same statement, prepared, same concurrency");
    println!("{:<10} {:>5} {:>12} {:>12}", "statement", "conc", "tps", "avg ms");
    let scratch = tempfile_dir()?;
    for scenario in &args.scenarios {
        let sql = match scenario.as_str() {
            "health" => HEALTH_SQL.to_owned(),
            "context" => CONTEXT_SQL.replace("$1", &format!("'{BENCH_SESSION}'")),
            _ => continue,
        };
        let script = scratch.join(format!("{scenario}.sql"));
        // pgbench reads one statement per line, so comments go and the rest is joined.
        let one_line: Vec<&str> =
            sql.lines().filter(|line| !line.trim_start().starts_with("--")).flat_map(str::split_whitespace).collect();
        std::fs::write(&script, format!("{};\n", one_line.join(" ").trim_end_matches(';')))?;
        for &concurrency in &args.concurrency {
            let output = tokio::process::Command::new(&pgbench)
                .args(["-n", "-M", "prepared", "-f"])
                .arg(&script)
                .args(["-c", &concurrency.to_string(), "-j", &concurrency.min(4).to_string()])
                .args(["-T", &format!("{}", args.seconds.ceil() as u64)])
                .arg(database_url)
                .output()
                .await
                .context("running pgbench")?;
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
            println!(
                "{:<10} {:>5} {:>12.0} {:>12.3}",
                scenario,
                concurrency,
                field("tps = "),
                field("latency average = ")
            );
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
