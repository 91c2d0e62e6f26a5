//! Test support: start the real `gatehouse` binary on a manifest, talk to it over HTTP, and
//! reach the same PostgreSQL it uses.
//!
//! `scripts/test` builds everything, starts one PostgreSQL for the run and exports
//! `DATABASE_URL`; each test starts its own runner process on a free port.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};

pub mod cluster;
pub mod gmail;
pub mod http_server;
pub mod lifecycle;
pub mod otlp;
pub mod proxy;
pub mod python_service;
pub mod raw;
pub mod reservations;
pub mod tool_host;
pub mod vector;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub fn gatehouse_bin() -> PathBuf {
    std::env::var_os("GATEHOUSE_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/release/gatehouse"))
}

/// `gatehouse migrate ARGS` against the database at `url`, and what it printed, whatever its
/// exit status.
pub fn migrate(url: &str, args: &[&str]) -> Result<std::process::Output> {
    Command::new(gatehouse_bin())
        .arg("migrate")
        .args(args)
        .env("DATABASE_URL", url)
        .stdin(Stdio::null())
        .output()
        .context("running gatehouse migrate")
}

/// The runner built on the wasmtime of an older Spin release (`crates/pinned-hosts`), e.g.
/// `gatehouse-wasmtime42`, beside [`gatehouse_bin`].
pub fn pinned_host_bin(name: &str) -> PathBuf {
    gatehouse_bin().with_file_name(name)
}

pub fn database_url() -> String {
    std::env::var("DATABASE_URL").expect("DATABASE_URL is not set: run the tests through scripts/test")
}

/// The loopback ports the tests' relays listen on, and all the test runners allow callbacks to
/// (`callback_allowed_hosts`, `callback_host`): named ports, as a deployment names its relays,
/// never a loopback wildcard. Below the kernel's ephemeral range (32768..60999 by default), so no
/// listener on port 0 and no outgoing connection of another test is ever given one of them.
const RELAY_PORTS: std::ops::Range<u16> = 21000..21999;
pub const RELAY_HOSTS: &str = "127.0.0.1:21000..21999";
/// The one port of the allowed range no relay is ever given: a callback URL on it is allowed and
/// always refused. A free port of the range would not do: another test's relay may take it
/// between the choice and the callback, and answer.
const UNREACHABLE_PORT: u16 = 21999;

/// A listener on a free port of the relays' range, for a relay in this process.
pub async fn relay_listener() -> Result<tokio::net::TcpListener> {
    for port in relay_ports() {
        if let Ok(listener) = tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
            return Ok(listener);
        }
    }
    bail!("every port of {RELAY_PORTS:?} is taken")
}

/// A port of the relays' range that is free now, for a relay in another process
/// (`gatehouse demo --relay-listen`) or for a callback URL nobody answers.
pub fn free_relay_address() -> Result<std::net::SocketAddr> {
    for port in relay_ports() {
        if let Ok(listener) = std::net::TcpListener::bind(("127.0.0.1", port)) {
            return Ok(listener.local_addr()?);
        }
    }
    bail!("every port of {RELAY_PORTS:?} is taken")
}

/// A callback URL the runners allow and nothing listens at.
pub fn unreachable_callback_url() -> Result<String> {
    Ok(format!("http://127.0.0.1:{UNREACHABLE_PORT}/callbacks"))
}

/// The range's ports from a start of this process's own, so parallel tests rarely try the same.
fn relay_ports() -> impl Iterator<Item = u16> {
    let span = RELAY_PORTS.end - RELAY_PORTS.start;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let first = u16::try_from((std::process::id() ^ now) % u32::from(span)).unwrap_or(0);
    (0..span).map(move |i| RELAY_PORTS.start + (first + i) % span)
}

/// A state folder shared by the test runners, so components are compiled once per run.
pub fn shared_state_dir() -> PathBuf {
    workspace_root().join("target/test-state")
}

pub fn app_manifest() -> PathBuf {
    workspace_root().join("spin.toml")
}

pub fn fixture_manifest() -> PathBuf {
    workspace_root().join("tests/fixtures/spin.toml")
}

pub const TOKEN: &str = "test-token";
/// The runners' `state_secret`: the same on every host, as a deployment's must be.
pub const STATE_SECRET: &str = "test-state-secret";

/// Options for one runner process.
#[derive(Default, Clone)]
pub struct RunnerOptions {
    pub variables: Vec<(String, String)>,
    pub env: Vec<(String, String)>,
    pub extra_args: Vec<String>,
    /// The address to listen on; `None` picks a free loopback port. A fixed address lets a
    /// host be stopped and started again where a proxy or another host expects it.
    pub listen: Option<String>,
    /// The runner binary; `None` is [`gatehouse_bin`]. A host pinned to an older wasmtime
    /// ([`pinned_host_bin`]) takes the same arguments.
    pub binary: Option<PathBuf>,
}

/// What an edge host serves: every public route, the executor and the sweeper; no tool.
pub const LIFECYCLE_COMPONENTS: [&str; 13] = [
    "health",
    "get-context",
    "pending",
    "modify",
    "cancel",
    "confirm",
    "resume",
    "status",
    "async-executor",
    "sweeper",
    "tools",
    "mcp",
    "fallback",
];

/// `gatehouse up` arguments that serve only these components (`--component-id`, repeated).
pub fn select_components(ids: &[&str]) -> Vec<String> {
    ids.iter().flat_map(|id| ["--component-id".to_owned(), (*id).to_owned()]).collect()
}

/// A `gatehouse up` process serving on a free loopback port; killed when dropped.
pub struct Runner {
    pub base_url: String,
    /// Where `--metrics-listen` serves, as the runner's own line says: with port 0 that is the
    /// only way to know the port, and asking for a free port first would race other tests.
    pub metrics_address: Option<String>,
    child: Child,
    logs: Arc<Mutex<Vec<String>>>,
}

/// `gatehouse up` on a free port against the test database, with the test token.
fn up_command(manifest: &Path, options: &RunnerOptions) -> Command {
    let mut command = Command::new(options.binary.clone().unwrap_or_else(gatehouse_bin));
    command
        .arg("up")
        .arg("--manifest")
        .arg(manifest)
        .arg("--listen")
        .arg(options.listen.as_deref().unwrap_or("127.0.0.1:0"))
        .env("DATABASE_URL", database_url())
        .env("GATEHOUSE_STATE_DIR", shared_state_dir())
        .env("SPIN_VARIABLE_API_TOKEN", TOKEN)
        .env("SPIN_VARIABLE_CALLBACK_SECRET", lifecycle::CALLBACK_SECRET)
        .env("SPIN_VARIABLE_STATE_SECRET", STATE_SECRET)
        .env("SPIN_VARIABLE_CALLBACK_ALLOWED_HOSTS", RELAY_HOSTS)
        .env("SPIN_VARIABLE_CALLBACK_HOST", RELAY_HOSTS)
        // Every test would hang under Spin 4.0.x if a component queried for nothing: the
        // runner fails such a query instead, so the test fails with the statement's text.
        .env("GATEHOUSE_REFUSE_ZERO_ROW_QUERIES", "true")
        .args(&options.extra_args)
        .stdin(Stdio::null());
    for (name, value) in &options.variables {
        command.arg("--variable").arg(format!("{name}={value}"));
    }
    for (key, value) in &options.env {
        command.env(key, value);
    }
    command
}

impl Runner {
    pub fn start(manifest: &Path, options: RunnerOptions) -> Result<Runner> {
        let mut command = up_command(manifest, &options);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().with_context(|| format!("spawning {:?}", command.get_program()))?;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().context("no stderr")?;
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Ok(mut logs) = sink.lock() {
                    logs.push(line);
                }
            }
        });
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // The metrics line comes before the ready line, so both are known once ready.
            let mut metrics_address = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(address) = line.strip_prefix("Gatehouse metrics on http://") {
                    metrics_address = address.strip_suffix("/metrics").map(str::to_owned);
                }
                if let Some(address) = line.strip_prefix("Gatehouse ready on ") {
                    let _ = tx.send((address.to_owned(), metrics_address.clone()));
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok((base_url, metrics_address)) => Ok(Runner { base_url, metrics_address, child, logs }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let logs = logs.lock().map(|l| l.join("\n")).unwrap_or_default();
                bail!("runner did not become ready; its log:\n{logs}")
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// Sends SIGINT, as Ctrl-C does, and waits for the runner to exit.
    pub fn interrupt_and_wait(&mut self) -> Result<std::process::ExitStatus> {
        self.signal("INT")?;
        Ok(self.child.wait()?)
    }

    /// Sends the signal `name` (`TERM`, `INT`, `KILL`) without waiting.
    pub fn signal(&self, name: &str) -> Result<()> {
        let sent = Command::new("kill").args([&format!("-{name}"), &self.child.id().to_string()]).status()?;
        if !sent.success() {
            bail!("could not signal the runner");
        }
        Ok(())
    }

    /// Waits up to `timeout` for the runner to exit, and gives its exit status.
    pub fn wait_for_exit(&mut self, timeout: Duration) -> Result<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            if std::time::Instant::now() > deadline {
                bail!("the runner did not exit within {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The runner's log lines so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `gatehouse up` expecting it to fail at start-up; returns its exit status and stderr.
pub fn start_expecting_failure(manifest: &Path, options: RunnerOptions) -> Result<(std::process::ExitStatus, String)> {
    let output = up_command(manifest, &options).output()?;
    Ok((output.status, String::from_utf8_lossy(&output.stderr).into_owned()))
}

/// A connection to the shared test database.
pub async fn db() -> Result<tokio_postgres::Client> {
    connect(&database_url()).await
}

/// A connection to the database at `url`, driven on the current runtime.
pub async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

pub fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// A JSON Lines file name under target/ that no other test uses.
pub fn scratch_file(name: &str) -> PathBuf {
    workspace_root().join("target").join(unique(name)).with_extension("jsonl")
}

/// A file of `count` documents from scripts/synthetic-corpus, under target/.
pub fn synthetic_corpus(count: usize) -> Result<PathBuf> {
    let file = scratch_file("corpus");
    let status = Command::new(workspace_root().join("scripts/synthetic-corpus"))
        .arg(count.to_string())
        .arg("--output")
        .arg(&file)
        .status()?;
    anyhow::ensure!(status.success(), "scripts/synthetic-corpus failed");
    Ok(file)
}

/// Seconds since the Unix epoch, for signature timestamps.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A contract signature header value (docs/architecture.md, "Signed hops") made at
/// `unix_seconds`, with a fresh nonce.
pub fn sign_contract(secret: &[u8], unix_seconds: u64, method: &str, path: &str, body: &[u8]) -> String {
    gatehouse_domain::service_auth::sign(secret, unix_seconds, &nonce(), method, path, body)
}

/// A fresh nonce for a signed service request, as a host makes one for each request.
pub fn nonce() -> String {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let count = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{:016x}{:08x}{:08x}", now as u64, std::process::id(), count)
}

/// A name no other test (or earlier run) uses, for sessions and scratch tables.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{prefix}_{}_{nanos:x}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}
