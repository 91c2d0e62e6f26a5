//! `gatehouse up`: database, migrations, then serve until Ctrl-C or SIGTERM.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;

use super::AppArgs;
use gatehouse_spin_host::variables::VariableSources;
use gatehouse_spin_host::{App, AppConfig, ZeroRows, log};

use crate::db::{Database, migrate, project_home};
use crate::metrics::MetricsServer;
use crate::sweep::Sweeper;
use crate::telemetry::Traces;

/// The token `up` uses when none is configured, so a newcomer can try the API at once.
pub(crate) const DEV_TOKEN: &str = "dev-token";
/// The callback signing key `up` uses when none is configured; a local relay verifies with it.
pub(crate) const DEV_CALLBACK_SECRET: &str = "dev-callback-secret";

/// 32 random bytes from the operating system, as hex.
fn random_secret() -> Result<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("the operating system gave no random bytes: {e}"))?;
    Ok(hex::encode(bytes))
}

#[derive(Args)]
pub(super) struct UpArgs {
    #[command(flatten)]
    pub(crate) app: AppArgs,
    /// Address to listen on; port 0 picks a free port (the ready line tells which).
    #[arg(long, default_value = "127.0.0.1:3000", env = "GATEHOUSE_LISTEN")]
    pub(crate) listen: SocketAddr,
    /// Set an application variable, as `spin up --variable` does. Repeatable.
    #[arg(long = "variable", value_name = "NAME=VALUE")]
    pub(crate) variables: Vec<String>,
    /// Largest request body accepted, in bytes; larger ones get 413.
    #[arg(long, default_value_t = 1 << 20)]
    pub(crate) max_body_bytes: usize,
    /// Database connections per address in the runner's pool.
    #[arg(long, default_value_t = 32)]
    pub(crate) pg_pool_size: usize,
    /// Seconds between the host's `POST /sweep` requests to the sweep component (Spin has no
    /// timer trigger, so the runner plays scheduler); 0 disables them.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "5",
        value_parser = parse_seconds,
        env = "GATEHOUSE_SWEEP_INTERVAL"
    )]
    pub(crate) sweep_interval: Duration,
    /// The component that gets the periodic `POST /sweep`; if the application has none, no
    /// sweeps are sent.
    #[arg(long, value_name = "ID", default_value = "sweeper", env = "GATEHOUSE_SWEEP_COMPONENT")]
    pub(crate) sweep_component: String,
    /// Folder holding the all-minilm-l6-v2 model files (default: `.spin/ai-models/all-minilm-l6-v2`
    /// beside the manifest, else at the project root).
    #[arg(long, value_name = "DIR", env = "GATEHOUSE_MODEL_DIR")]
    pub(crate) model_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) guest_limits: GuestLimits,
    #[command(flatten)]
    pub(crate) connection_limits: ConnectionArgs,
    /// Serve only this component (repeatable), as `spin up --component-id` does; the default is
    /// every component. A selected component that reaches an unselected one by service chaining
    /// stops start-up, naming both.
    #[arg(long = "component-id", value_name = "ID")]
    pub(crate) component_ids: Vec<String>,
    /// Answer a component's query that returns no rows with an error naming the statement, as a
    /// check: Spin 4.0.x's PostgreSQL host never returns from such a query (spin issue 3671).
    /// The test suite runs with it.
    #[arg(long, env = "GATEHOUSE_REFUSE_ZERO_ROW_QUERIES")]
    pub(crate) refuse_zero_row_queries: bool,
    /// On SIGTERM or Ctrl-C, how long to go on serving while the readiness answer
    /// (`/.well-known/spin/health`) says 503, before no longer accepting requests: set it to a
    /// little more than the proxy's (or Kubernetes') health-check interval, so traffic has
    /// moved to other hosts when this one stops.
    #[arg(long, value_name = "SECONDS", default_value = "0", value_parser = parse_seconds, env = "GATEHOUSE_DRAIN_DELAY")]
    pub(crate) drain_delay: Duration,
    /// Serve `/metrics` in Prometheus' text format on this address, apart from the public port
    /// (port 0 picks a free one; a line on stdout tells which). Off when not given.
    #[arg(long, value_name = "ADDR", env = "GATEHOUSE_METRICS_LISTEN")]
    pub(crate) metrics_listen: Option<SocketAddr>,
}

/// How long a guest may run, and how many may be alive at once.
#[derive(Args, Clone, Debug)]
pub(super) struct GuestLimits {
    /// Seconds a request's guest may live, from the request's arrival to the end of any work
    /// it goes on with after answering; fractions allowed (`0.5`). A guest still running then
    /// is stopped: a request not yet answered gets 503 `deadline_exceeded`.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = DEFAULT_REQUEST_TIMEOUT,
        value_parser = parse_request_timeout,
        env = "GATEHOUSE_REQUEST_TIMEOUT"
    )]
    pub(crate) request_timeout: Duration,
    /// Component instances alive at once, across all components (requests in flight plus work
    /// after a response); a request waits, within its deadline, for a free one. A request that
    /// calls another component holds one instance for each.
    #[arg(
        long,
        value_name = "N",
        default_value_t = gatehouse_spin_host::DEFAULT_MAX_INSTANCES,
        value_parser = clap::value_parser!(u32).range(1..=MAX_INSTANCES_ACCEPTED),
        env = "GATEHOUSE_MAX_INSTANCES"
    )]
    pub(crate) max_instances: u32,
}

/// What one client connection may take (see `gatehouse_spin_host::ConnectionLimits`).
#[derive(Args, Clone, Debug)]
pub(super) struct ConnectionArgs {
    /// Seconds a connection has to send a request's head (the first, or the next on a kept-alive
    /// connection); a slower one is closed.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_request_timeout, env = "GATEHOUSE_HEADER_READ_TIMEOUT")]
    pub(crate) header_read_timeout: Duration,
    /// Seconds a request has to send its body once its head has arrived; a slower one gets 408.
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_request_timeout, env = "GATEHOUSE_BODY_READ_TIMEOUT")]
    pub(crate) body_read_timeout: Duration,
    /// Connections open at once; more wait until one closes.
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000), env = "GATEHOUSE_MAX_CONNECTIONS")]
    pub(crate) max_connections: u32,
    /// Requests one connection may make before the host closes it.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=1_000_000), env = "GATEHOUSE_MAX_REQUESTS_PER_CONNECTION")]
    pub(crate) max_requests_per_connection: u32,
}

impl Default for ConnectionArgs {
    fn default() -> ConnectionArgs {
        ConnectionArgs::from(gatehouse_spin_host::ConnectionLimits::default())
    }
}

impl From<gatehouse_spin_host::ConnectionLimits> for ConnectionArgs {
    fn from(limits: gatehouse_spin_host::ConnectionLimits) -> ConnectionArgs {
        ConnectionArgs {
            header_read_timeout: limits.header_read_timeout,
            body_read_timeout: limits.body_read_timeout,
            max_connections: u32::try_from(limits.max_connections).unwrap_or(u32::MAX),
            max_requests_per_connection: u32::try_from(limits.max_requests_per_connection).unwrap_or(u32::MAX),
        }
    }
}

impl ConnectionArgs {
    fn limits(&self) -> gatehouse_spin_host::ConnectionLimits {
        gatehouse_spin_host::ConnectionLimits {
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_requests_per_connection: usize::try_from(self.max_requests_per_connection).unwrap_or(usize::MAX),
        }
    }
}

/// The default deadline of a guest, a little above the longest request the application makes
/// in normal use, so only a guest that is stuck ever meets it:
///
/// - `POST /execute-gmail`, the longest: the PREPARING gate (`gate_timeout_seconds`, 30 s),
///   the draft, the READY_TO_SEND gate (30 s), the send (the draft and the send each within
///   the budget of a tool run, `tool_timeout_seconds`, 30 s), and the completion callback (4
///   attempts of `callback_timeout_seconds`, 5 s, with 0.2 + 0.4 + 0.8 s of backoff: 21.4 s):
///   30 + 30 + 30 + 30 + 21.4 = about 141 s, plus its database round trips.
/// - The executor's drive (a chained request, so with a deadline of its own): prepare (30 s),
///   checkpoint callback (21.4 s), execute (30 s), completion callback (21.4 s): about 103 s.
///   Confirm and resume wait for it at most the execution lease (60 s), after a
///   `Prefer: wait` of at most 30 s.
/// - `POST /query-vector-db`: one gate (30 s), the search, the completion callback (21.4 s).
///
/// 300 s is twice the longest of them. What it can cut short is a pathological run, such as a
/// sweep whose follow-up owes hundreds of completion callbacks to a relay that is down, or
/// Gmail failing through every retry.
const DEFAULT_REQUEST_TIMEOUT: &str = "300";
const DEFAULT_REQUEST_TIMEOUT_SECONDS: u64 = 300;

/// The largest pool accepted: each instance reserves address space for its memories, and ten
/// thousand already reserve tens of TiB.
const MAX_INSTANCES_ACCEPTED: i64 = 10_000;

impl Default for GuestLimits {
    fn default() -> GuestLimits {
        GuestLimits {
            request_timeout: Duration::from_secs(DEFAULT_REQUEST_TIMEOUT_SECONDS),
            max_instances: gatehouse_spin_host::DEFAULT_MAX_INSTANCES,
        }
    }
}

/// The longest sweep interval accepted: longer is surely a typo, and a huge one would overflow
/// the timer's deadline.
const MAX_SWEEP_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// A deadline: like [`parse_seconds`], but more than zero, since a zero deadline would stop
/// every request.
fn parse_request_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse_seconds(text)?;
    if timeout.is_zero() {
        return Err(format!("'{text}' is not more than 0 seconds"));
    }
    Ok(timeout)
}

/// A number of seconds from 0 to a day, fractions allowed (`0.2`).
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.trim().parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|interval| *interval <= MAX_SWEEP_INTERVAL)
        .ok_or_else(|| format!("'{text}' is not between 0 and {} seconds", MAX_SWEEP_INTERVAL.as_secs()))
}

pub(super) async fn run(args: UpArgs) -> Result<()> {
    let running = start(&args).await?;
    println!("Gatehouse ready on http://{}", running.address);
    shutdown_signal().await;
    running.stop().await
}

/// How long shutdown waits for guests still working (say, a confirmed call being executed).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// A serving application and the database under it.
pub(super) struct Running {
    pub(crate) address: SocketAddr,
    app: std::sync::Arc<App>,
    database: Database,
    sweeper: Option<Sweeper>,
    drain_delay: Duration,
    /// The local Gmail-compatible server of dev mode, if one was started.
    _dev_gmail: Option<gatehouse_fake_gmail::FakeGmail>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<()>>,
    traces: Traces,
    metrics: Option<MetricsServer>,
}

impl Running {
    pub(super) fn database_url(&self) -> &str {
        &self.database.url
    }

    /// Drains: reports "not ready" while still serving for the drain delay, then stops
    /// accepting requests and sweeping, closes each connection once its request is answered,
    /// lets running guests finish (within a grace period), and stops the embedded database
    /// last, so no work is cut off from the database mid-way.
    pub(super) async fn stop(self) -> Result<()> {
        self.app.start_draining();
        if !self.drain_delay.is_zero() {
            log::info("draining", serde_json::json!({"delay_seconds": self.drain_delay.as_secs_f64()}));
            tokio::time::sleep(self.drain_delay).await;
        }
        let _ = self.stop.send(());
        if let Some(metrics) = self.metrics {
            metrics.stop().await;
        }
        // Before the drain: a sweep started during it would be a new guest the drain might cut off.
        if let Some(sweeper) = self.sweeper {
            sweeper.stop().await;
        }
        let served = self.server.await.context("server task")?;
        if !self.app.drain(SHUTDOWN_GRACE).await {
            log::warn(
                "guests still running at shutdown were stopped",
                serde_json::json!({"grace_seconds": SHUTDOWN_GRACE.as_secs()}),
            );
        }
        let stopped = self.database.stop();
        self.traces.shutdown().await;
        served.and(stopped)
    }
}

pub(super) async fn start(args: &UpArgs) -> Result<Running> {
    let root = args.app.project_root()?;
    let state_dir = args.app.state_dir()?;
    // A declared tool with a mistake is refused before anything starts, naming its file and
    // field, rather than on the first call that reaches it.
    super::tools::check_manifest(&args.app.manifest_path()?)?;
    // Before the application loads: its first span must find the exporter installed.
    let traces = Traces::start_from_env()?;
    let database = Database::open(&root, &state_dir).await?;
    match listen(args, &database, state_dir).await {
        Ok((app, listener, dev_gmail, metrics)) => {
            let address = listener.local_addr()?;
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let limits = args.connection_limits.limits();
            let server = tokio::spawn(gatehouse_spin_host::serve(app.clone(), listener, limits, async {
                let _ = stopped.await;
            }));
            let sweeper = Sweeper::start(app.clone(), &args.sweep_component, args.sweep_interval);
            let drain_delay = args.drain_delay;
            let metrics = match args.metrics_listen {
                Some(listen) => {
                    let (server, address) =
                        MetricsServer::start(listen, metrics, Some(app.clone()), database.url.clone()).await?;
                    println!("Gatehouse metrics on http://{address}/metrics");
                    Some(server)
                }
                None => None,
            };
            Ok(Running {
                address,
                app,
                database,
                sweeper,
                drain_delay,
                _dev_gmail: dev_gmail,
                stop,
                server,
                traces,
                metrics,
            })
        }
        Err(e) => {
            // Leave no embedded server running behind a failed start.
            let _ = database.stop();
            Err(e)
        }
    }
}

async fn listen(
    args: &UpArgs,
    database: &Database,
    state_dir: PathBuf,
) -> Result<(std::sync::Arc<App>, tokio::net::TcpListener, Option<gatehouse_fake_gmail::FakeGmail>, prometheus::Registry)>
{
    if database.is_embedded() {
        log::info("using the embedded PostgreSQL", serde_json::json!({"data": state_dir.join("pgdata")}));
    }
    let migrated = migrate(&database.url, Some(&args.app.manifest_path()?)).await?;
    for migration in migrated.applied {
        log::info("applied migration", serde_json::json!({"migration": migration}));
    }
    if !migrated.waiting.is_empty() {
        log::info(
            "contract steps wait for `gatehouse migrate --contract` once no earlier release serves",
            serde_json::json!({"waiting": migrated.waiting}),
        );
    }

    let mut variables = VariableSources::from_process_env();
    for flag in &args.variables {
        variables.add_flag(flag)?;
    }
    variables.provided.insert("db_url".into(), database.url.clone());
    variables.provided.insert("db_host".into(), database.host_port()?);
    if !variables.flags.contains_key("api_token") && !variables.env.contains_key("api_token") {
        // A token everyone knows is only for this machine: anyone who can reach a listener on
        // another interface could use it.
        if !args.listen.ip().is_loopback() {
            anyhow::bail!(
                "no api_token is set, and {} is not a loopback address: set SPIN_VARIABLE_API_TOKEN \
                 (or --variable api_token=...), or listen on 127.0.0.1",
                args.listen
            );
        }
        eprintln!("dev mode: no SPIN_VARIABLE_API_TOKEN set, so the API token is '{DEV_TOKEN}'");
        variables.provided.insert("api_token".into(), DEV_TOKEN.into());
    }
    if !variables.flags.contains_key("callback_secret") && !variables.env.contains_key("callback_secret") {
        eprintln!(
            "dev mode: no SPIN_VARIABLE_CALLBACK_SECRET set, so callbacks are signed with '{DEV_CALLBACK_SECRET}'"
        );
        variables.provided.insert("callback_secret".into(), DEV_CALLBACK_SECRET.into());
    }
    if !variables.flags.contains_key("callback_allowed_hosts") && !variables.env.contains_key("callback_allowed_hosts")
    {
        // No wildcard: the one relay this machine's own tools run (`gatehouse demo`, `bench`).
        let relay = gatehouse_bench::LOCAL_RELAY;
        eprintln!("no callback_allowed_hosts set, so callbacks may go only to the local demo relay, {relay}");
        variables.provided.insert("callback_allowed_hosts".into(), relay.to_string());
        variables.provided.insert("callback_host".into(), relay.to_string());
    } else if variables.lookup("callback_host").is_none() {
        derive_callback_host(&mut variables);
    }
    if !variables.flags.contains_key("state_secret") && !variables.env.contains_key("state_secret") {
        // Random for this process: only this host signs and reads the state it hands out. Hosts
        // that share clients must share one, set like the other secrets.
        eprintln!("dev mode: no SPIN_VARIABLE_STATE_SECRET set, so a random one is used until this process stops");
        variables.provided.insert("state_secret".into(), random_secret()?);
    }
    let manifest_path = args.app.manifest_path()?;
    let project_home = project_home(&args.app.project_root()?);
    let dev_gmail =
        super::dev_gmail::start_if_unconfigured(&manifest_path, &mut variables, &state_dir.join("mail")).await?;

    let metrics = prometheus::Registry::new();
    let app = App::load(AppConfig {
        manifest_path,
        variables,
        cache_dir: state_dir.join("compiled"),
        max_body_bytes: args.max_body_bytes,
        pg_pool_size: args.pg_pool_size,
        model_dir: args.model_dir.clone(),
        request_timeout: args.guest_limits.request_timeout,
        max_instances: args.guest_limits.max_instances,
        component_ids: args.component_ids.clone(),
        zero_rows: if args.refuse_zero_row_queries { ZeroRows::Refuse } else { ZeroRows::Allow },
        project_home,
        build_command: "gatehouse build".into(),
        telemetry_hooks: Some(crate::telemetry::GatehouseTelemetry::hooks(&metrics)?),
        metrics: metrics.clone(),
    })?;
    let mut components: Vec<&str> = app.component_ids().collect();
    components.sort_unstable();
    log::info("application loaded", serde_json::json!({"application": app.name(), "components": components}));
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    Ok((app, listener, dev_gmail, metrics))
}

pub(super) async fn shutdown_signal() {
    let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(signal) => signal,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    log::info("shutting down", serde_json::json!({}));
}

/// `callback_allowed_hosts` says which relays the application may call back; the manifest's
/// `allowed_outbound_hosts` names `callback_host`, so the host lets the request out. With one
/// relay allowed and no `callback_host` set, the one is the other; with several (or a wildcard)
/// only the operator knows which outbound rule covers them, so they are told
/// (docs/architecture.md, "Callbacks").
fn derive_callback_host(variables: &mut VariableSources) {
    let allowed = variables.lookup("callback_allowed_hosts").cloned().unwrap_or_default();
    let entries: Vec<&str> = allowed.split(',').map(str::trim).filter(|e| !e.is_empty()).collect();
    match entries.as_slice() {
        [single] if !single.contains('*') && !single.contains("..") => {
            eprintln!("callback_host not set: callbacks go out to the one allowed relay, {single}");
            variables.provided.insert("callback_host".into(), (*single).to_owned());
        }
        [] => {}
        _ => eprintln!(
            "warning: callback_allowed_hosts names several relays (or a pattern) but callback_host is not \
             set, so the manifest's allowed_outbound_hosts lets no callback out: set callback_host to a \
             pattern that covers them (for example *.relays.example.com)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_intervals_are_seconds_from_zero_to_a_day() {
        assert_eq!(parse_seconds("5"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_seconds("0.2"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        assert_eq!(parse_seconds("86400"), Ok(MAX_SWEEP_INTERVAL));
        for bad in ["-1", "86401", "inf", "NaN", "", "5s"] {
            assert!(parse_seconds(bad).is_err(), "{bad:?} must be refused");
        }
    }

    #[test]
    fn request_timeouts_are_more_than_zero_seconds_and_default_to_five_minutes() {
        assert_eq!(parse_request_timeout("1"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_request_timeout("0.25"), Ok(Duration::from_millis(250)));
        for bad in ["0", "-1", "86401", "", "1m"] {
            assert!(parse_request_timeout(bad).is_err(), "{bad:?} must be refused");
        }
        // The flag's default and the one `bench` starts its own server with are the same.
        assert_eq!(parse_request_timeout(DEFAULT_REQUEST_TIMEOUT), Ok(GuestLimits::default().request_timeout));
        assert_eq!(GuestLimits::default().request_timeout, Duration::from_secs(300));
    }

    #[test]
    fn up_takes_the_guest_limits_as_flags() {
        use clap::Parser;
        #[derive(Parser)]
        struct Up {
            #[command(flatten)]
            up: UpArgs,
        }
        let defaults = Up::try_parse_from(["up"]).expect("no flags needed").up.guest_limits;
        assert_eq!(defaults.request_timeout, Duration::from_secs(300));
        assert_eq!(defaults.max_instances, 1000);
        let set = Up::try_parse_from(["up", "--request-timeout", "1.5", "--max-instances", "4"])
            .expect("both flags parse")
            .up
            .guest_limits;
        assert_eq!(set.request_timeout, Duration::from_millis(1500));
        assert_eq!(set.max_instances, 4);
        assert!(Up::try_parse_from(["up", "--max-instances", "0"]).is_err(), "an empty pool serves nothing");
        assert!(Up::try_parse_from(["up", "--request-timeout", "0"]).is_err(), "a zero deadline stops everything");
    }

    #[test]
    fn one_allowed_relay_is_the_callback_host_and_several_are_left_to_the_operator() {
        let mut one = VariableSources::default();
        one.flags.insert("callback_allowed_hosts".into(), " relay.example.com:8443 ".into());
        derive_callback_host(&mut one);
        assert_eq!(one.lookup("callback_host").map(String::as_str), Some("relay.example.com:8443"));
        for several in ["a.example.com,b.example.com", "*.example.com", "127.0.0.1:41000..41999", ""] {
            let mut sources = VariableSources::default();
            sources.env.insert("callback_allowed_hosts".into(), several.into());
            derive_callback_host(&mut sources);
            assert_eq!(sources.lookup("callback_host"), None, "{several:?}");
        }
    }
}
