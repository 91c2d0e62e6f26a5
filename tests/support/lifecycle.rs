//! Serving the application with the test-only fixture tool, and a relay that records the
//! callbacks it receives.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::{Runner, RunnerOptions, TOKEN, workspace_root};

/// The HMAC key the test runners sign callbacks with.
pub const CALLBACK_SECRET: &str = "test-callback-secret";
/// The registry entry that maps the fixture's function names to its component.
pub const FIXTURE_REGISTRY: &str = "fixture_action|fixture_alias=fixture-tool";

/// The application of spin.toml plus the fixture tool (tests/fixtures/lifecycle.toml).
pub fn lifecycle_manifest() -> PathBuf {
    workspace_root().join("tests/fixtures/lifecycle.toml")
}

/// The fixture tool's own tables: its side effects and every operation it ran. The DDL is
/// shared with `gatehouse bench`.
const FIXTURE_TABLES_SQL: &str = include_str!("../fixtures/fixture_tool.sql");

/// Creates the fixture tool's tables if they are missing.
pub async fn ensure_fixture_tables(db: &tokio_postgres::Client) -> Result<()> {
    db.batch_execute(FIXTURE_TABLES_SQL).await?;
    Ok(())
}

/// The application plus fixture tool, served by one runner.
pub struct App {
    pub runner: Runner,
    pub http: reqwest::Client,
    pub database_url: String,
}

/// Variables every lifecycle test runner gets; `extra` overrides or adds.
pub fn lifecycle_options(extra: &[(&str, &str)], args: &[&str]) -> RunnerOptions {
    let mut variables: Vec<(String, String)> =
        vec![("tool_registry".into(), FIXTURE_REGISTRY.into()), ("callback_secret".into(), CALLBACK_SECRET.into())];
    for (name, value) in extra {
        variables.retain(|(n, _)| n != name);
        variables.push(((*name).into(), (*value).into()));
    }
    RunnerOptions { variables, extra_args: args.iter().map(|a| (*a).to_owned()).collect(), ..Default::default() }
}

/// Options for the application with the callback secret and `contract_secret`, and with
/// `registry` as its tools when given: those may be on any loopback port (`tools_origin`).
pub fn tool_options(contract_secret: &str, registry: Option<String>) -> RunnerOptions {
    let mut variables = vec![
        ("callback_secret".to_owned(), CALLBACK_SECRET.to_owned()),
        ("contract_secret".to_owned(), contract_secret.to_owned()),
    ];
    if let Some(registry) = registry {
        variables.push(("tool_registry".to_owned(), registry));
        variables.push(("tools_origin".to_owned(), "http://127.0.0.1:*".to_owned()));
    }
    RunnerOptions { variables, ..Default::default() }
}

/// A JSON answer: status and body (`Null` if the body is not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: reqwest::header::HeaderMap,
}

impl App {
    pub async fn start(options: RunnerOptions) -> Result<App> {
        App::start_on(&lifecycle_manifest(), options).await
    }

    /// The application of `manifest` (one that extends spin.toml, as the fixtures do).
    pub async fn start_on(manifest: &std::path::Path, options: RunnerOptions) -> Result<App> {
        let database_url = options
            .env
            .iter()
            .find(|(name, _)| name == "DATABASE_URL")
            .map_or_else(crate::database_url, |(_, url)| url.clone());
        ensure_fixture_tables(&crate::connect(&database_url).await?).await?;
        let runner = Runner::start(manifest, options)?;
        Ok(App { runner, http: reqwest::Client::new(), database_url })
    }

    /// A connection to the database this runner serves from: the shared one, or the scratch
    /// database its options name.
    pub async fn db(&self) -> Result<tokio_postgres::Client> {
        crate::connect(&self.database_url).await
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Answer> {
        self.send_with(method, path, body, &[]).await
    }

    pub async fn send_with(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<Answer> {
        self.send_as(TOKEN, method, path, body, headers).await
    }

    /// A request made with `key` (an API key, or the token).
    pub async fn send_as(
        &self,
        key: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> Result<Answer> {
        let mut request = self.http.request(method, self.runner.url(path)).bearer_auth(key);
        if let Some(body) = body {
            request = request.json(&body);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await?;
        let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        Ok(Answer { status, body, headers })
    }

    pub async fn create(&self, session: &str, parameters: Value, callback_url: Option<&str>) -> Result<Answer> {
        let mut body = json!({"session_id": session, "function_name": "fixture_action", "parameters": parameters});
        if let Some(url) = callback_url {
            body["callback_url"] = json!(url);
        }
        self.send(reqwest::Method::POST, "/voice-tools/pending", Some(body)).await
    }

    /// Creates a call and returns its id, failing the test if that does not work.
    pub async fn create_id(&self, session: &str, parameters: Value, callback_url: Option<&str>) -> Result<String> {
        let answer = self.create(session, parameters, callback_url).await?;
        if answer.status != 201 {
            bail!("create answered {}: {}", answer.status, answer.body);
        }
        answer.body["tool_call_id"].as_str().map(str::to_owned).context("no tool_call_id")
    }

    pub async fn confirm(&self, id: &str) -> Result<Answer> {
        self.send(reqwest::Method::POST, &format!("/voice-tools/confirm/{id}"), None).await
    }

    pub async fn cancel(&self, id: &str) -> Result<Answer> {
        self.send(reqwest::Method::DELETE, &format!("/voice-tools/cancel/{id}"), None).await
    }

    pub async fn resume(&self, id: &str, action: &str) -> Result<Answer> {
        self.send(reqwest::Method::POST, &format!("/resume-execution/{id}"), Some(json!({"action": action}))).await
    }

    pub async fn status(&self, id: &str) -> Result<Answer> {
        self.send(reqwest::Method::GET, &format!("/voice-tools/status/{id}"), None).await
    }

    pub async fn sweep(&self) -> Result<Answer> {
        self.send(reqwest::Method::POST, "/voice-tools/sweep", None).await
    }

    /// Polls the call until its status is `wanted`, or fails after `timeout`.
    /// The call's callback attempts (`GET /voice-tools/calls/:id/callbacks`, its whole answer)
    /// once it lists at least `count`. Each attempt's row is written after its delivery ends,
    /// so it may land a moment after the relay has the callback: read right away, it can be
    /// missing.
    pub async fn callback_attempts(&self, id: &str, count: usize, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let answer = self.send(reqwest::Method::GET, &format!("/voice-tools/calls/{id}/callbacks"), None).await?;
            let listed = answer.body["callbacks"].as_array().map_or(0, Vec::len);
            if answer.status == 200 && listed >= count {
                return Ok(answer.body);
            }
            if Instant::now() > deadline {
                bail!(
                    "{id}: {listed} callback attempts after {timeout:?}, not {count}: {} {}",
                    answer.status,
                    answer.body
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub async fn wait_for(&self, id: &str, wanted: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let answer = self.status(id).await?;
            if answer.body["status"] == wanted {
                return Ok(answer.body);
            }
            if Instant::now() > deadline {
                bail!("{id} is {} after {timeout:?}, not {wanted}: {}", answer.body["status"], answer.body);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `tool`'s stats (`/voice-tools/tools/{tool}/stats`) once `ready` holds, polled for up to
    /// `timeout`: a history row is written after the answer of the operation it records.
    pub async fn stats_when(&self, tool: &str, timeout: Duration, ready: impl Fn(&Value) -> bool) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let stats = self.send(reqwest::Method::GET, &format!("/voice-tools/tools/{tool}/stats"), None).await?;
            anyhow::ensure!(stats.status == 200, "{}", stats.body);
            if ready(&stats.body) {
                return Ok(stats.body);
            }
            if Instant::now() > deadline {
                bail!("the stats never showed what was expected: {}", stats.body);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// How the test relay answers progress callbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressReply {
    Continue,
    Cancel,
    /// Cancel at the gate of this name (a direct flow's), continue at the others.
    CancelAtGate(&'static str),
}

/// One callback the relay received, with whether its signature verified.
#[derive(Debug, Clone)]
pub struct Received {
    pub kind: String,
    pub body: Value,
    /// Whether the signature verifies with the tests' callback secret.
    pub signature_valid: bool,
    /// The `X-Gatehouse-Signature` header and the body's bytes as they came, to verify with
    /// another secret.
    pub signature: Option<String>,
    /// The path and query it was posted to, which the signature binds.
    pub target: String,
    pub raw_body: Vec<u8>,
    pub traceparent: Option<String>,
}

impl Received {
    /// Whether the signature verifies with `secret`, as a relay holding it would check.
    pub fn verifies_with(&self, secret: &str) -> bool {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        gatehouse_domain::callback::verify(
            &[secret.as_bytes()],
            self.signature.as_deref(),
            &self.target,
            &self.raw_body,
            now,
        )
        .is_ok()
    }
}

/// A relay: an HTTP server that records the callbacks it receives and checks their signatures.
pub struct Relay {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    reply: Arc<Mutex<ProgressReply>>,
    /// How many of the next callbacks to answer with a 500.
    failures: Arc<Mutex<usize>>,
}

impl Relay {
    pub async fn start() -> Result<Relay> {
        let listener = crate::relay_listener().await?;
        let url = format!("http://{}/callbacks", listener.local_addr()?);
        let received = Arc::new(Mutex::new(Vec::new()));
        let reply = Arc::new(Mutex::new(ProgressReply::Continue));
        let failures = Arc::new(Mutex::new(0));
        let (sink, mode, failing) = (received.clone(), reply.clone(), failures.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (sink, mode, failing) = (sink.clone(), mode.clone(), failing.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<Incoming>| {
                        let (sink, mode, failing) = (sink.clone(), mode.clone(), failing.clone());
                        async move { Ok::<_, Infallible>(receive(request, &sink, &mode, &failing).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(Relay { url, received, reply, failures })
    }

    /// Answers the next `count` callbacks with HTTP 500 (they are still recorded).
    pub fn fail_next(&self, count: usize) {
        if let Ok(mut failures) = self.failures.lock() {
            *failures = count;
        }
    }

    pub fn set_progress_reply(&self, reply: ProgressReply) {
        if let Ok(mut mode) = self.reply.lock() {
            *mode = reply;
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The first callback of `kind` for the call, if one has arrived, without copying the others.
    pub fn find(&self, id: &str, kind: &str) -> Option<Received> {
        self.received.lock().ok()?.iter().find(|r| r.kind == kind && r.body["tool_call_id"] == id).cloned()
    }

    /// The callbacks for one call, in arrival order.
    pub fn for_call(&self, id: &str) -> Vec<Received> {
        self.received().into_iter().filter(|r| r.body["tool_call_id"] == id).collect()
    }

    /// Waits until a callback of `kind` for the call has arrived, and returns it.
    pub async fn wait_for(&self, id: &str, kind: &str, timeout: Duration) -> Result<Received> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = self.for_call(id).into_iter().find(|r| r.kind == kind) {
                return Ok(found);
            }
            if Instant::now() > deadline {
                bail!("no {kind} callback for {id} within {timeout:?}; got {:?}", self.for_call(id));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn receive(
    request: hyper::Request<Incoming>,
    sink: &Mutex<Vec<Received>>,
    mode: &Mutex<ProgressReply>,
    failures: &Mutex<usize>,
) -> hyper::Response<Full<Bytes>> {
    let header = |name: &str| request.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let (signature, kind, traceparent) =
        (header("x-gatehouse-signature"), header("x-gatehouse-callback"), header("traceparent"));
    let target = request.uri().path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_default();
    let body = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let signature_valid =
        gatehouse_domain::callback::verify(&[CALLBACK_SECRET.as_bytes()], signature.as_deref(), &target, &body, now)
            .is_ok();
    let kind = kind.unwrap_or_default();
    let payload: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let cancel = match mode.lock().map(|m| *m).unwrap_or(ProgressReply::Continue) {
        ProgressReply::Continue => false,
        ProgressReply::Cancel => true,
        ProgressReply::CancelAtGate(gate) => payload["gate"] == gate,
    };
    let reply = if kind == "progress" && cancel {
        json!({"cancel": true, "reason": "the caller changed their mind"})
    } else {
        json!({"continue": true})
    };
    if let Ok(mut received) = sink.lock() {
        received.push(Received {
            kind,
            body: payload,
            signature_valid,
            signature,
            target,
            raw_body: body.to_vec(),
            traceparent,
        });
    }
    let fail = failures
        .lock()
        .map(|mut left| {
            if *left > 0 {
                *left -= 1;
                true
            } else {
                false
            }
        })
        .unwrap_or(false);
    let mut response = hyper::Response::new(Full::new(Bytes::from(reply.to_string())));
    if fail {
        *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
    }
    response
}

impl App {
    /// Polls the call until it is settled (COMPLETED, FAILED, CANCELLED or EXPIRED).
    pub async fn wait_for_settled(&self, id: &str) -> Result<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body = self.status(id).await?.body;
            if matches!(body["status"].as_str(), Some("COMPLETED" | "FAILED" | "CANCELLED" | "EXPIRED")) {
                return Ok(body);
            }
            if Instant::now() > deadline {
                bail!("{id} did not settle: {body}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// A database of its own for one test, migrated and with the fixture tool's tables, for
/// assertions on totals that other tests running at the same time must not disturb. Dropped
/// with the value.
pub struct ScratchDatabase {
    pub name: String,
    pub url: String,
}

impl ScratchDatabase {
    pub async fn create(prefix: &str) -> Result<ScratchDatabase> {
        let scratch = ScratchDatabase::migrated_to(prefix, None).await?;
        ensure_fixture_tables(&scratch.connect().await?).await?;
        Ok(scratch)
    }

    /// A new database with the core's migrations up to `version` (all of them without one),
    /// as a release that shipped then left it: for upgrade tests.
    pub async fn migrated_to(prefix: &str, version: Option<i32>) -> Result<ScratchDatabase> {
        let name = crate::unique(prefix).to_lowercase();
        let admin = crate::db().await?;
        admin.batch_execute(&format!("CREATE DATABASE \"{name}\"")).await?;
        let scratch = ScratchDatabase { url: crate::vector::with_database(&crate::database_url(), &name)?, name };
        scratch.migrate(version)?;
        Ok(scratch)
    }

    /// `gatehouse migrate`, up to `version` when one is given; without one, the contract steps
    /// too, as an operator finishing an upgrade does.
    pub fn migrate(&self, version: Option<i32>) -> Result<()> {
        let to = version.map(|v| v.to_string());
        let args = match &to {
            Some(to) => vec!["--to", to.as_str()],
            None => vec!["--contract"],
        };
        let out = crate::migrate(&self.url, &args)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        anyhow::ensure!(out.status.success(), "migrating {} failed: {stderr}", self.name);
        Ok(())
    }

    pub async fn connect(&self) -> Result<tokio_postgres::Client> {
        crate::connect(&self.url).await
    }

    /// Runner options that serve from this database.
    pub fn serve(&self, mut options: RunnerOptions) -> RunnerOptions {
        options.env.push(("DATABASE_URL".into(), self.url.clone()));
        options
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        // Best effort, on a thread of its own: Drop cannot await, and a leftover scratch
        // database only costs disk in the test server, which the run throws away.
        let name = self.name.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
            if let Ok(runtime) = runtime {
                runtime.block_on(async {
                    if let Ok(admin) = crate::db().await {
                        let _ = admin.batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).await;
                    }
                });
            }
        })
        .join();
    }
}
