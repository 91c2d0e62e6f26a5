//! The database floor: pgbench running the routes' own statements at the same concurrency, so
//! the report shows how much of a route's latency is the database and how much is Gatehouse.
use anyhow::{Context, Result, bail};

use gatehouse_domain::keys::DEFAULT_TENANT;

use crate::lifecycle;
use crate::scenario::Statement;
use crate::sessions::{BENCH_LARGE_SESSION, BENCH_SESSION};
use crate::setup::Setup;

/// The statements the routes send, so the database floor is measured on exactly them.
const HEALTH_SQL: &str = "SELECT 1";
const CONTEXT_SQL: &str = include_str!("../../store/src/sql/session_context_view.sql");
const CALLS_SQL: &str = include_str!("../../store/src/sql/audit/calls.sql");
const STATS_SQL: &str = include_str!("../../store/src/sql/history/stats.sql");
const PAGE_SQL: &str = include_str!("../../store/src/sql/history/page.sql");

/// The read routes' statements as the routes bind them by default: the first tenant's first
/// page of calls (25) and of the fixture tool's executions (50), and its stats over `24h`.
fn history_sql(statement: Statement) -> String {
    use crate::lifecycle::{FUNCTION, bind, literal, one_line};
    use gatehouse_domain::{stats_partition_bounds, unix_seconds};
    let (tenant, tool, null) = (literal(DEFAULT_TENANT), literal(FUNCTION), "NULL".to_owned());
    let bound = match statement {
        Statement::Calls => {
            bind(CALLS_SQL, &[null.clone(), null.clone(), null.clone(), null.clone(), null, "25".into(), tenant])
        }
        Statement::Stats => {
            // Bound as the store binds them (docs/architecture.md, "Retention").
            let (window_start, window_end) = stats_partition_bounds(unix_seconds(), 86_400.0);
            let (window_start, window_end) = (format!("{window_start:.0}"), format!("{window_end:.0}"));
            bind(STATS_SQL, &[tool, "86400".into(), literal("24h"), tenant, window_start, window_end])
        }
        _ => bind(PAGE_SQL, &[tool, null.clone(), null.clone(), null.clone(), null, "50".into(), tenant]),
    };
    one_line(&bound)
}

/// One pgbench run.
pub(crate) struct Floor {
    pub(crate) statement: Statement,
    pub(crate) concurrency: usize,
    pub(crate) tps: f64,
    pub(crate) avg_ms: f64,
}

/// Runs `pgbench` with the routes' own statements at the same concurrency, so the table shows
/// how much of a route's latency is the database and how much is Gatehouse.
pub(crate) async fn database_floor(
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
        .filter(|st| lifecycle.is_some() || st.reads_only())
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
                (Statement::Calls | Statement::Stats | Statement::Executions, _) => history_sql(statement),
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
    let (client, _driver) = gatehouse_pg_connect::connect(database_url).await?;
    let mut settings = Vec::new();
    for name in ["fsync", "synchronous_commit"] {
        let value: String = client.query_one(&format!("SHOW {name}"), &[]).await?.get(0);
        settings.push(format!("{name}={value}"));
    }
    Ok(settings.join(", "))
}

/// The context route's statement with the values the store binds, for pgbench.
fn context_sql(session: &str) -> String {
    use gatehouse_domain::context::{COUNT_CAP, PENDING_LIMIT, RECENT_LIMIT};
    CONTEXT_SQL
        .replace("$1", &format!("'{session}'"))
        .replace("$2", &PENDING_LIMIT.to_string())
        .replace("$3", &RECENT_LIMIT.to_string())
        .replace("$4", &COUNT_CAP.to_string())
        .replace("$5", &format!("'{}'", gatehouse_domain::keys::DEFAULT_TENANT))
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

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("gatehouse-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
