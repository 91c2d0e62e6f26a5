//! `gatehouse bench`'s command-line arguments.
use clap::Args;

use crate::{cpu, relay};

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
    /// Skip the database floor (pgbench) after the scenarios: for a run that is only load
    /// beside another measurement, whose floor would land on that measurement.
    #[arg(long)]
    pub no_floor: bool,
    /// Before measuring, top the first tenant's seeded calls up to this many: final calls of
    /// the fixture tool in sessions of four, with their histories, executions and callbacks
    /// (docs/benchmarks.md, "At scale"). Needs DATABASE_URL with --url.
    #[arg(long, default_value_t = 0)]
    pub seed_calls: u64,
    /// Before measuring, top the fixture tool's executions of the last day up to this many
    /// (what the `stats` scenario reads).
    #[arg(long, default_value_t = 0)]
    pub seed_executions: u64,
    /// The days the seeded calls' sessions spread over, ending an hour ago.
    #[arg(long, default_value_t = 30.0)]
    pub seed_days: f64,
    /// Before measuring, add this many waiting PENDING calls, all past their deadline at once
    /// (the sweeper's backlog after an outage), then follow how fast the application's
    /// sweeper drains them while the scenarios run: for `gatehouse up` with its sweeper on,
    /// through --url.
    #[arg(long, default_value_t = 0)]
    pub seed_expiring: u64,
    /// The backlog's calls name a relay of the benchmark's listening here (which the
    /// application must allow, beside --relay-listen) as their callback URL, and the benchmark
    /// follows their expiry reports: how many arrived while the sweeper drained the backlog, and
    /// how long after the drain the last one did.
    #[arg(long, value_name = "ADDR", requires = "seed_expiring")]
    pub backlog_reports: Option<std::net::SocketAddr>,
    /// After seeding, apply the sweeper's retention with this many days of history (the
    /// executions', callback attempts' and rollups' week partitions that end before are dropped), then
    /// print the database's size again. 0 keeps everything.
    #[arg(long, value_name = "DAYS")]
    pub retain_history_days: Option<i32>,
    /// With --retain-history-days: the days of final calls kept (0 keeps everything).
    #[arg(long, value_name = "DAYS", default_value_t = 0, requires = "retain_history_days")]
    pub retain_calls_days: i32,
}
