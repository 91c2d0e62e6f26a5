//! Several hosts of one application behind a real proxy: two edge hosts (the public lifecycle
//! routes) balanced by HAProxy, one executor host (the executor and the sweeper) and one tools
//! host (Gmail and vector search), each a `gatehouse up --component-id ...` process on a fixed
//! loopback port so it can be killed and started again where the others expect it. They share
//! the test database and an in-process fake Gmail, which outlives every host.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_fake_gmail::FakeGmail;

use crate::gmail::{gmail_variables, start_fake};
use crate::lifecycle::CALLBACK_SECRET;
use crate::{Runner, RunnerOptions, app_manifest, http, select_components, unique, workspace_root};

/// The secret that signs the tool contract and the executor hand-off between the hosts.
pub const CONTRACT_SECRET: &str = "contract-secret-for-the-cluster";
/// How long an executor owns a call before the sweeper may re-drive it: short, so a call
/// whose executor is gone is taken up again soon.
pub const LEASE_SECONDS: &str = "3";
/// The edge hosts' `--drain-delay`: more than HAProxy's check interval (200 ms).
pub const DRAIN_DELAY_SECONDS: &str = "1";

/// The public lifecycle routes.
pub const EDGE_COMPONENTS: [&str; 11] =
    ["health", "get-context", "pending", "modify", "cancel", "confirm", "resume", "status", "tools", "mcp", "fallback"];
/// The executor and the sweeper; the host answers `/.well-known/spin/health` itself.
pub const EXECUTOR_COMPONENTS: [&str; 2] = ["async-executor", "sweeper"];
/// The tools.
pub const TOOL_COMPONENTS: [&str; 4] = ["gmail", "vector-query", "health", "fallback"];

/// A loopback port free at the time of asking.
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// One `gatehouse up` process on a fixed address, which can be stopped and started again.
pub struct Host {
    pub name: String,
    pub address: String,
    options: RunnerOptions,
    runner: Option<Runner>,
}

impl Host {
    fn new(name: &str, components: &[&str], variables: Vec<(String, String)>, args: &[&str]) -> Result<Host> {
        let address = format!("127.0.0.1:{}", free_port()?);
        let mut extra_args = select_components(components);
        extra_args.extend(args.iter().map(|a| (*a).to_owned()));
        let options = RunnerOptions { variables, extra_args, listen: Some(address.clone()), ..Default::default() };
        Ok(Host { name: name.to_owned(), address, options, runner: None })
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.address, path)
    }

    pub fn is_running(&self) -> bool {
        self.runner.is_some()
    }

    /// Starts the host and waits until it says it is ready. It blocks: under a multi-threaded
    /// runtime it runs with `block_in_place`.
    pub fn start(&mut self) -> Result<()> {
        ensure!(self.runner.is_none(), "{} is already running", self.name);
        let options = self.options.clone();
        let runner = tokio::task::block_in_place(|| Runner::start(&app_manifest(), options))
            .with_context(|| format!("starting the {} host", self.name))?;
        self.runner = Some(runner);
        Ok(())
    }

    /// `kill -9`: the host dies with whatever it was doing, stays down for a moment so requests
    /// meet a dead host, and is started again on its port. Gives how long it was down.
    pub async fn kill_and_restart(&mut self) -> Result<Duration> {
        let down = Instant::now();
        let mut runner = self.runner.take().with_context(|| format!("{} is not running", self.name))?;
        runner.signal("KILL")?;
        tokio::task::block_in_place(|| runner.wait_for_exit(Duration::from_secs(10)))?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        self.start()?;
        Ok(down.elapsed())
    }

    /// SIGTERM: the host drains (not ready, still serving for the drain delay), finishes what
    /// it has and exits; this waits for the exit and gives its status.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let mut runner = self.runner.take().with_context(|| format!("{} is not running", self.name))?;
        runner.signal("TERM")?;
        tokio::task::block_in_place(|| runner.wait_for_exit(Duration::from_secs(60)))
    }
}

/// HAProxy in the foreground, balancing the edge hosts; killed when dropped.
pub struct Proxy {
    pub url: String,
    pub config: PathBuf,
    child: Child,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn haproxy_bin() -> Result<PathBuf> {
    ["/usr/sbin/haproxy", "/usr/bin/haproxy", "/usr/local/sbin/haproxy"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .context("haproxy is not installed: run scripts/setup --tests")
}

/// The HAProxy configuration: round-robin over the edges, each checked every 200 ms on Spin's
/// readiness route and taken out after one failed check, a request whose connection failed or
/// got no answer sent again to the other edge.
pub fn haproxy_config(listen: &str, edges: &[&Host]) -> String {
    let servers: String = edges
        .iter()
        .map(|edge| format!("    server {} {} check inter 200 fall 1 rise 1\n", edge.name, edge.address))
        .collect();
    format!(
        "global
    maxconn 2000

defaults
    mode http
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout queue 10s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response

frontend public
    bind {listen}
    default_backend edges

backend edges
    balance roundrobin
    option httpchk
    http-check send meth GET uri /.well-known/spin/health
    http-check expect status 200
{servers}"
    )
}

/// The whole deployment.
pub struct Cluster {
    pub fake: FakeGmail,
    pub edges: Vec<Host>,
    pub executor: Host,
    pub tools: Host,
    pub proxy: Proxy,
}

impl Cluster {
    /// Starts the fake Gmail, the tools, executor and edge hosts, then HAProxy, and waits until
    /// the proxy answers. Needs a multi-threaded runtime (hosts start with `block_in_place`).
    pub async fn start() -> Result<Cluster> {
        let fake = start_fake().await?;
        let tools_port = free_port()?;
        let executor_port = free_port()?;
        let tools_origin = format!("http://127.0.0.1:{tools_port}");
        let executor_origin = format!("http://127.0.0.1:{executor_port}");
        let registry = format!(
            "send_email|send_gmail={tools_origin}/internal/tools/gmail,query_vector_db={tools_origin}/internal/tools/vector-query"
        );
        let mut common = gmail_variables(&fake);
        common.retain(|(name, _)| name != "tool_registry");
        common.extend([
            ("tool_registry".to_owned(), registry),
            ("tools_origin".to_owned(), tools_origin.clone()),
            ("contract_secret".to_owned(), CONTRACT_SECRET.to_owned()),
            ("callback_secret".to_owned(), CALLBACK_SECRET.to_owned()),
            ("execution_lease_seconds".to_owned(), LEASE_SECONDS.to_owned()),
        ]);
        let mut tools = Host::new("tools", &TOOL_COMPONENTS, common.clone(), &["--sweep-interval", "0"])?;
        tools.address = format!("127.0.0.1:{tools_port}");
        tools.options.listen = Some(tools.address.clone());
        // The executor host reaches its own executor by service chaining (executor_origin's
        // default), as the sweeper does.
        let mut executor = Host::new("executor", &EXECUTOR_COMPONENTS, common.clone(), &["--sweep-interval", "0.5"])?;
        executor.address = format!("127.0.0.1:{executor_port}");
        executor.options.listen = Some(executor.address.clone());
        let mut edge_variables = common;
        edge_variables.push(("executor_origin".to_owned(), executor_origin));
        let edge_args = ["--drain-delay", DRAIN_DELAY_SECONDS, "--sweep-interval", "0"];
        let mut edges = vec![
            Host::new("edge1", &EDGE_COMPONENTS, edge_variables.clone(), &edge_args)?,
            Host::new("edge2", &EDGE_COMPONENTS, edge_variables, &edge_args)?,
        ];
        tools.start()?;
        executor.start()?;
        for edge in &mut edges {
            edge.start()?;
        }

        let dir = workspace_root().join("target/scale-out").join(unique("cluster"));
        std::fs::create_dir_all(&dir)?;
        let listen = format!("127.0.0.1:{}", free_port()?);
        let config = dir.join("haproxy.cfg");
        std::fs::write(&config, haproxy_config(&listen, &edges.iter().collect::<Vec<_>>()))?;
        let log = std::fs::File::create(dir.join("haproxy.log"))?;
        let child = Command::new(haproxy_bin()?)
            .arg("-db")
            .arg("-f")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting haproxy")?;
        let proxy = Proxy { url: format!("http://{listen}"), config, child };
        let cluster = Cluster { fake, edges, executor, tools, proxy };
        cluster.wait_for_proxy(Duration::from_secs(20)).await?;
        Ok(cluster)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.proxy.url, path)
    }

    /// Waits until both edges answer through the proxy (round-robin: two answers in a row).
    pub async fn wait_for_proxy(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let client = http();
        let mut in_a_row = 0;
        while in_a_row < 4 {
            let ok =
                matches!(client.get(self.url("/.well-known/spin/health")).send().await, Ok(r) if r.status() == 200);
            in_a_row = if ok { in_a_row + 1 } else { 0 };
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.proxy.config.with_file_name("haproxy.log")).unwrap_or_default();
                bail!("the proxy did not answer within {timeout:?}; its log:\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// HAProxy's log so far.
    pub fn proxy_log(&self) -> String {
        std::fs::read_to_string(self.proxy.config.with_file_name("haproxy.log")).unwrap_or_default()
    }
}
