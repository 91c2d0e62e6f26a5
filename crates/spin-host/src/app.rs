//! A loaded application: its components compiled and pre-instantiated, its routing table, and
//! the dispatch of one request to one component in a fresh store.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use gatehouse_domain::{ApiError, ErrorCode};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;
use tokio::sync::Semaphore;
use wasmtime::component::Linker;
use wasmtime::{Store, UpdateDeadline};

use crate::chaining::{ChainError, ChainedResponse, Outbound, ServeChained};
use crate::host::{self, ComponentRuntime, HostState, LocalModels, PgPools, ZeroRows};
use crate::host_answer::HostAnswer;
use crate::manifest::Manifest;
use crate::metrics::HostMetrics;
use crate::outbound::AllowedHosts;
use crate::routing::{RouteMatch, Router};
use crate::telemetry::{ComponentFacts, ComponentSpan, DEADLINE_EXCEEDED, NoHooks, Telemetry, TelemetryHooks};
use crate::variables::{ResolvedVariables, VariableSources};
use crate::wasi_http::{self, Body, Handler};
use crate::well_known::{self, HostStatus};

pub struct AppConfig {
    pub manifest_path: PathBuf,
    pub variables: VariableSources,
    /// Where compiled components are cached between runs.
    pub cache_dir: PathBuf,
    /// Requests with a larger body are refused with 413 before a component runs.
    pub max_body_bytes: usize,
    pub pg_pool_size: usize,
    /// The embedding model's folder, if named (`--model-dir`); else it is looked for in
    /// `.spin/ai-models/` beside the manifest, then at the project root.
    pub model_dir: Option<PathBuf>,
    /// How long a guest may live, from its request's arrival (waiting for a free instance
    /// included) to the end of any work it goes on with after answering.
    pub request_timeout: Duration,
    /// Component instances alive at once, across all components: the size of the pool.
    pub max_instances: u32,
    /// The components this host serves (`--component-id`); all of them when empty.
    pub component_ids: Vec<String>,
    /// Answer a guest's `query` that returns no rows with an error naming the statement, since
    /// Spin 4.0.x's PostgreSQL host never returns from one (`--refuse-zero-row-queries`).
    pub zero_rows: ZeroRows,
    /// The project's folder: the embedding model is also looked for in its `.spin/ai-models/`,
    /// after the manifest's folder.
    pub project_home: PathBuf,
    /// The command that builds the components, named when a component's Wasm file is missing.
    pub build_command: String,
    /// The application's own part in the spans and metrics (src/telemetry.rs); none adds only
    /// the host's.
    pub telemetry_hooks: Option<Arc<dyn TelemetryHooks>>,
    /// Where the host registers its metrics (src/metrics.rs), for the program to serve.
    pub metrics: prometheus::Registry,
}

struct LoadedComponent {
    handler: Handler<HostState>,
    runtime: Arc<ComponentRuntime>,
}

pub struct App {
    name: String,
    /// Every guest run, including work a guest goes on with after answering, so shutdown can
    /// let it finish instead of cutting it off.
    guests: tokio_util::task::TaskTracker,
    router: Router,
    components: HashMap<String, LoadedComponent>,
    pg: Arc<PgPools>,
    max_body_bytes: usize,
    request_timeout: Duration,
    /// One permit per instance the pool holds, taken before instantiating and given back once
    /// the store is dropped. A request waits here, within its deadline, for a free instance,
    /// instead of failing at once when every instance is busy.
    instances: Arc<Semaphore>,
    /// Set when the host starts to stop: `/.well-known/spin/health` then answers 503.
    draining: AtomicBool,
    this: Weak<App>,
    max_instances: u32,
    telemetry: Arc<Telemetry>,
    /// The components' `files`, staged for as long as the application runs (src/files.rs); none
    /// when no component has files.
    _files: Option<tempfile::TempDir>,
}

/// How long a guest runs before it starts yielding at every epoch tick. A request's guest
/// normally finishes well within it and so never pays for a yield, which puts its task at the
/// back of the run queue. Yielding from the first tick instead made nearly every request
/// yield (a tick passing during a host call counts too): in paired runs of
/// `gatehouse bench --scenario create` at 16 clients, p95 rose from 12.2-14.8 ms to
/// 14.6-16.6 ms and throughput fell by about 8% (medians of ten runs each).
const YIELD_AFTER: Duration = Duration::from_millis(50);

/// A guest stopped because it outlived its request's deadline: trapped by the epoch callback
/// while running, or dropped while it waited (for a free instance, or in a host call).
#[derive(Debug, thiserror::Error)]
#[error("component '{component}' ran past its deadline of {} s and was stopped", timeout.as_secs_f64())]
pub(crate) struct DeadlineExceeded {
    pub component: Arc<str>,
    pub timeout: Duration,
}

/// Where a request came from: a client over the network, or another component by chaining.
pub(crate) enum Origin {
    Client(SocketAddr),
    Chained,
}

impl App {
    pub fn load(config: AppConfig) -> Result<Arc<App>> {
        let mut manifest = Manifest::load(&config.manifest_path)?;
        let manifest_dir = config.manifest_path.parent().map(Path::to_path_buf).unwrap_or_default();
        let variables = ResolvedVariables::resolve(&manifest, &config.variables)?;
        crate::selection::retain_selected(&mut manifest, &config.component_ids, &variables)?;
        let router = Router::new(&manifest.trigger.http)?;
        let engine = crate::engine::new_engine(config.max_instances)?;
        crate::engine::start_epoch_ticker(&engine)?;
        let mut linker = Linker::new(&engine);
        host::add_to_linker(&mut linker)?;
        let models = local_models(&manifest, &manifest_dir, &config.project_home, config.model_dir.clone());

        // The files components may read, copied here so nothing beside them is reachable. Made
        // only when a component has files: a folder left by a killed host is then the exception.
        let staging = if manifest.component.values().any(|decl| !decl.files.is_empty()) {
            let dir = tempfile::Builder::new().prefix("gatehouse-files-").tempdir();
            Some(dir.context("a folder for component files")?)
        } else {
            None
        };
        let mut components = HashMap::new();
        for (id, decl) in &manifest.component {
            let source = manifest.source_path(&manifest_dir, id).context("component source")?;
            let component = crate::engine::load_component(&engine, &source, &config.cache_dir, &config.build_command)
                .with_context(|| format!("loading component '{id}' from {}", source.display()))?;
            let handler = wasi_http::handler(linker.instantiate_pre(&component)?)
                .with_context(|| format!("component '{id}' is not a wasi:http incoming-handler"))?;
            let allowed: Vec<String> = decl
                .allowed_outbound_hosts
                .iter()
                .map(|h| variables.expand(h))
                .collect::<Result<_, _>>()
                .with_context(|| format!("allowed_outbound_hosts of component '{id}'"))?;
            let runtime = ComponentRuntime {
                id: Arc::from(id.as_str()),
                variables: variables.for_component(&decl.variables)?,
                allowed_hosts: Arc::new(AllowedHosts::parse(&allowed).with_context(|| format!("component '{id}'"))?),
                environment: decl.environment.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                ai_models: decl.ai_models.clone(),
                models: models.clone(),
                mounts: match &staging {
                    Some(staging) => crate::files::mounts(decl, &manifest_dir, &staging.path().join(id))
                        .with_context(|| format!("component '{id}'"))?,
                    None => Vec::new(),
                },
            };
            components.insert(id.clone(), LoadedComponent { handler, runtime: Arc::new(runtime) });
        }
        let name = manifest.application.name.clone();
        let metrics = HostMetrics::register(&config.metrics, components.keys().map(String::as_str))
            .context("registering the host's metrics")?;
        metrics.instances_max.set(i64::from(config.max_instances));
        let hooks = config.telemetry_hooks.unwrap_or_else(|| Arc::new(NoHooks));
        let facts: Vec<ComponentFacts<'_>> =
            components.keys().map(|id| ComponentFacts { id, routes: router.routes_of(id).collect() }).collect();
        hooks.loaded(&facts);
        let telemetry = Arc::new(Telemetry { metrics, hooks });
        Ok(Arc::new_cyclic(|this| App {
            name,
            guests: tokio_util::task::TaskTracker::new(),
            router,
            components,
            pg: Arc::new(PgPools::with_zero_rows(config.pg_pool_size, config.zero_rows)),
            max_body_bytes: config.max_body_bytes,
            request_timeout: config.request_timeout,
            instances: Arc::new(Semaphore::new(usize::try_from(config.max_instances).unwrap_or(usize::MAX))),
            draining: AtomicBool::new(false),
            this: this.clone(),
            max_instances: config.max_instances,
            telemetry,
            _files: staging,
        }))
    }

    /// Marks the host as stopping: its readiness answer (`/.well-known/spin/health`) turns to
    /// 503 while it goes on serving, so a proxy moves new requests elsewhere first.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Waits up to `grace` for running guests to finish; true if they all did.
    pub async fn drain(&self, grace: std::time::Duration) -> bool {
        self.guests.close();
        tokio::time::timeout(grace, self.guests.wait()).await.is_ok()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Brings the gauges read at a scrape up to date: guest instances alive, pooled connections.
    pub fn refresh_metrics(&self) {
        let metrics = &self.telemetry.metrics;
        let free = i64::try_from(self.instances.available_permits()).unwrap_or(i64::MAX);
        metrics.instances_in_use.set(i64::from(self.max_instances).saturating_sub(free));
        let (in_use, idle) = self.pg.connections();
        metrics.pool_connections.with_label_values(&["in_use"]).set(in_use);
        metrics.pool_connections.with_label_values(&["idle"]).set(idle);
    }

    pub fn component_ids(&self) -> impl Iterator<Item = &str> {
        self.components.keys().map(String::as_str)
    }

    /// Serves a request from the network: public routes only. The body must arrive within
    /// `body_read_timeout` of the head (else 408) and within the size cap (else 413).
    pub async fn handle_inbound(
        &self,
        request: Request<hyper::body::Incoming>,
        client: SocketAddr,
        body_read_timeout: Duration,
    ) -> Response<Body> {
        let path = request.uri().path().to_owned();
        if path.starts_with(well_known::PREFIX) {
            let status = HostStatus { application: &self.name, draining: self.is_draining() };
            return host_response(well_known::answer(&status, &path));
        }
        let Some(route) = self.router.route(&path) else {
            return error_response(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound.as_str(),
                "Nothing is served at this path.",
            );
        };
        let (parts, body) = request.into_parts();
        let read =
            tokio::time::timeout(body_read_timeout, http_body_util::Limited::new(body, self.max_body_bytes).collect());
        let Ok(collected) = read.await else {
            let message = format!("The request's body did not arrive within {} s.", body_read_timeout.as_secs_f64());
            return error_response(StatusCode::REQUEST_TIMEOUT, ErrorCode::RequestTimeout.as_str(), &message);
        };
        let body = match collected {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                let refusal = ApiError::payload_too_large(self.max_body_bytes);
                return error_response(StatusCode::PAYLOAD_TOO_LARGE, refusal.code.as_str(), &refusal.message);
            }
            Err(_) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidInput.as_str(),
                    "The request body could not be read.",
                );
            }
        };
        let request = Request::from_parts(parts, full_body(body));
        match self.dispatch(route, request, Origin::Client(client)).await {
            Ok(response) => response,
            Err(e) => failure_response(&e),
        }
    }

    /// Sends `component` a request as another component's `http://<component>.spin.internal`
    /// would, and reads its answer to the end: how the host reaches a private route itself
    /// (the periodic sweep).
    pub async fn call_component(
        &self,
        component: &str,
        method: Method,
        path: &str,
        json_body: Bytes,
    ) -> Result<(StatusCode, Bytes)> {
        let host = format!("{component}{}", crate::outbound::CHAINING_SUFFIX);
        let request = Request::builder()
            .method(method)
            .uri(format!("http://{host}{path}"))
            // A guest's chained request carries its authority as Host; so does this one.
            .header(http::header::HOST, &host)
            .header(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(full_body(json_body))?;
        let response = self.dispatch_chained(component, request).await?;
        let status = response.status();
        let body = response.into_body().collect().await.map_err(|e| anyhow::anyhow!("{e:?}"))?.to_bytes();
        Ok((status, body))
    }

    /// Serves `http://<component>.spin.internal/...` for another component.
    async fn dispatch_chained(&self, component: &str, request: Request<Body>) -> Result<Response<Body>, ChainError> {
        if !self.components.contains_key(component) {
            return Err(ChainError::UnknownComponent(component.to_owned()));
        }
        let route = RouteMatch::chained(component, request.uri().path());
        match self.dispatch(route, request, Origin::Chained).await {
            Ok(response) => Ok(response),
            Err(e) => Ok(failure_response(&e)),
        }
    }

    async fn dispatch(&self, route: RouteMatch, mut request: Request<Body>, origin: Origin) -> Result<Response<Body>> {
        let component = self.components.get(&route.component).context("routed to an unknown component")?;
        set_spin_headers(&mut request, &route, &origin);
        let id = component.runtime.id.clone();
        // A request from the network matched a public route; a chained one names no route.
        let (public_route, client) = match origin {
            Origin::Client(address) => (Some(route.raw_route.as_str()), Some(address)),
            Origin::Chained => (None, None),
        };
        let params: Vec<(String, String)> = route.params.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let arrived = Instant::now();
        let span = ComponentSpan::start(
            id.clone(),
            public_route,
            params,
            client,
            arrived,
            &mut request,
            self.telemetry.clone(),
        );
        let timeout = self.request_timeout;
        let deadline = arrived + timeout;
        let chain: Weak<dyn ServeChained<Body>> = self.this.clone();
        let outbound = Outbound::new(id.clone(), component.runtime.allowed_hosts.clone(), chain, span.guest());
        let state = HostState::new(outbound, component.runtime.clone(), self.pg.clone(), span.guest());
        let mut store = Store::new(component.handler.engine(), state);
        store.limiter(|state| &mut state.limits);
        // Called at the first epoch check after each tick: past the deadline the guest traps;
        // before it, a guest that has been at work longer than a request normally takes
        // yields, so it cannot keep other requests off its runtime worker.
        store.set_epoch_deadline(1);
        let ticking = id.clone();
        store.epoch_deadline_callback(move |_| {
            let now = Instant::now();
            if now >= deadline {
                Err(wasmtime::Error::new(DeadlineExceeded { component: ticking.clone(), timeout }))
            } else if now.duration_since(arrived) >= YIELD_AFTER {
                Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now())))
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        let (exchange, receiver) = wasi_http::exchange(&mut store, request)?;
        let handler = component.handler.clone();
        let instances = self.instances.clone();
        // The guest runs in its own task so it can keep working after it has sent its response,
        // as Spin allows; the store lives as long as that task, and at most until the deadline.
        let span = Arc::new(span);
        let task = self.guests.spawn({
            let id = id.clone();
            let span = span.clone();
            let run = async move {
                let deadline = tokio::time::Instant::from_std(deadline);
                let stopped = || anyhow::Error::new(DeadlineExceeded { component: id.clone(), timeout });
                // Waiting for a free instance counts against the deadline too.
                let instance = match tokio::time::timeout_at(deadline, instances.acquire_owned()).await {
                    Ok(permit) => permit.context("the instance pool is closed")?,
                    Err(_elapsed) => return Err(stopped()),
                };
                // The timeout also ends a guest blocked in a host call (a query or an outbound
                // request that never returns), which the epoch callback cannot reach.
                let outcome = tokio::time::timeout_at(deadline, wasi_http::run(&handler, &mut store, exchange)).await;
                // The store first: dropping it gives the instance back to the pool, and only then
                // may the permit let another request instantiate.
                drop(store);
                drop(instance);
                match outcome {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) if e.is::<DeadlineExceeded>() => Err(stopped()),
                    Ok(Err(e)) => Err(anyhow::Error::from(e)),
                    Err(_elapsed) => Err(stopped()),
                }
            };
            async move {
                let outcome = run.await;
                match &outcome {
                    Ok(()) => {}
                    Err(e) if e.is::<DeadlineExceeded>() => span.failed(DEADLINE_EXCEEDED),
                    Err(_) => span.failed("component_failed"),
                }
                outcome
            }
        });
        match receiver.await {
            Ok(Ok(response)) => {
                span.answered(response.status(), response.headers());
                tokio::spawn(log_guest_end(id, task));
                Ok(response)
            }
            Ok(Err(code)) => {
                span.failed("component_error");
                Err(anyhow::anyhow!("component '{id}' answered with an error: {code:?}"))
            }
            Err(_) => {
                let error = match task.await {
                    Ok(Ok(())) => anyhow::anyhow!("component '{id}' returned without sending a response"),
                    Ok(Err(e)) if e.is::<DeadlineExceeded>() => e,
                    Ok(Err(e)) => e.context(format!("component '{id}' failed")),
                    Err(e) => anyhow::anyhow!("component '{id}' task failed: {e}"),
                };
                Err(error)
            }
        }
    }
}

impl ServeChained<Body> for App {
    fn serve_chained(self: Arc<Self>, component: String, request: Request<Body>) -> ChainedResponse<Body> {
        Box::pin(async move { self.dispatch_chained(&component, request).await })
    }
}

/// A body the host has whole.
fn full_body(bytes: Bytes) -> Body {
    Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
}

/// The embedding model the components may share. It loads on first use; a component that lists
/// it when its files are missing is told at start-up rather than on its first request.
fn local_models(
    manifest: &Manifest,
    manifest_dir: &Path,
    project_root: &Path,
    explicit: Option<PathBuf>,
) -> Arc<LocalModels> {
    let mut roots = vec![manifest_dir.to_path_buf()];
    if project_root != manifest_dir {
        roots.push(project_root.to_path_buf());
    }
    let models = Arc::new(LocalModels::new(explicit, roots));
    let model = gatehouse_embeddings::MODEL_NAME;
    let users: Vec<&str> = manifest
        .component
        .iter()
        .filter(|(_, decl)| decl.ai_models.iter().any(|m| m == model))
        .map(|(id, _)| id.as_str())
        .collect();
    if !users.is_empty()
        && let Err(e) = models.model_dir()
    {
        crate::log::warn("embedding model not found", json!({"components": users, "error": e.to_string()}));
    }
    models
}

/// Logs a guest that fails, or is stopped at its deadline, after it has already answered: its
/// caller has its response, but the failure of the work it went on with must not vanish.
async fn log_guest_end(id: Arc<str>, task: tokio::task::JoinHandle<Result<()>>) {
    let failure = match task.await {
        Ok(Ok(())) => return,
        Ok(Err(failure)) => failure,
        Err(e) => {
            let fields = json!({"component": &*id, "error": e.to_string()});
            return crate::log::error("component task failed after responding", fields);
        }
    };
    match failure.downcast_ref::<DeadlineExceeded>() {
        Some(stopped) => crate::log::error(
            "component ran past its deadline after responding and was stopped",
            json!({"component": &*id, "deadline_seconds": stopped.timeout.as_secs_f64()}),
        ),
        None => crate::log::error(
            "component failed after responding",
            json!({"component": &*id, "error": format!("{failure:#}")}),
        ),
    }
}

fn set_spin_headers<B>(request: &mut Request<B>, route: &RouteMatch, origin: &Origin) {
    let full_url = {
        let host =
            request.headers().get(http::header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("localhost").to_owned();
        let path_and_query = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
        format!("http://{host}{path_and_query}")
    };
    let headers = request.headers_mut();
    // A client must not be able to forge the routing facts a component relies on.
    let forged: Vec<_> = headers.keys().filter(|k| k.as_str().starts_with("spin-")).cloned().collect();
    for name in forged {
        headers.remove(name);
    }
    let mut set = |name: &str, value: &str| {
        if let (Ok(name), Ok(value)) = (http::HeaderName::try_from(name), HeaderValue::from_str(value)) {
            headers.insert(name, value);
        }
    };
    set("spin-full-url", &full_url);
    set("spin-path-info", &route.path_info);
    set("spin-matched-route", &route.raw_route);
    set("spin-raw-component-route", &route.raw_route);
    set("spin-component-route", &route.component_route);
    set("spin-base-path", "/");
    // Spin reports an unspecified address for a request that came from another component.
    let client = match origin {
        Origin::Client(addr) => addr.to_string(),
        Origin::Chained => "0.0.0.0:0".to_owned(),
    };
    set("spin-client-addr", &client);
    for (name, value) in &route.params {
        set(&format!("spin-path-match-{name}"), value);
    }
}

/// An answer of the runner's own, in the shape of the API's errors (see [`HostAnswer::error`]).
fn error_response(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    host_response(HostAnswer::error(status, code, message))
}

/// A response the host writes itself, not a guest. A 503 or a 429 says when to try again, as
/// every such answer of the application does (`gatehouse_domain::retry_after`).
fn host_response(answer: HostAnswer) -> Response<Body> {
    let HostAnswer { status, content_type, body } = answer;
    let mut response = Response::new(full_body(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Some(seconds) = gatehouse_domain::retry_after(status.as_u16()) {
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static(seconds));
    }
    response
}

/// The answer to a request whose guest failed before responding. The error itself is logged,
/// never sent: it can name internals a client has no business reading.
fn failure_response(error: &anyhow::Error) -> Response<Body> {
    if let Some(stopped) = error.downcast_ref::<DeadlineExceeded>() {
        crate::log::warn(
            "component ran past its deadline and was stopped",
            json!({"component": &*stopped.component, "deadline_seconds": stopped.timeout.as_secs_f64()}),
        );
        // Retry-After only paces a retry: a guest stopped mid-way may already have done part
        // of its work (written a row, sent an email), so the client should look at what
        // happened (a call's status) before trying again; `deadline_exceeded` says so.
        let message = format!(
            "The request took longer than the server allows ({} s) and was stopped.",
            stopped.timeout.as_secs_f64()
        );
        return error_response(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::DeadlineExceeded.as_str(), &message);
    }
    crate::log::error("request failed", json!({"error": format!("{error:#}")}));
    let internal = ApiError::internal();
    error_response(StatusCode::INTERNAL_SERVER_ERROR, internal.code.as_str(), &internal.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The status, content type, `Retry-After` and JSON body of a response.
    async fn read(response: Response<Body>) -> (StatusCode, String, Option<String>, serde_json::Value) {
        let status = response.status();
        let retry_after =
            response.headers().get(http::header::RETRY_AFTER).and_then(|value| value.to_str().ok()).map(str::to_owned);
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.into_body().collect().await.expect("a body").to_bytes();
        (status, content_type, retry_after, serde_json::from_slice(&body).expect("a JSON body"))
    }

    #[tokio::test]
    async fn a_guest_stopped_at_its_deadline_is_a_503_in_the_api_error_shape() {
        let stopped =
            anyhow::Error::new(DeadlineExceeded { component: Arc::from("probe"), timeout: Duration::from_secs(300) })
                .context("component 'probe' failed");
        let (status, content_type, retry_after, body) = read(failure_response(&stopped)).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(content_type, "application/json");
        assert_eq!(retry_after, Some(gatehouse_domain::RETRY_AFTER_SECONDS.to_owned()), "a 503 says when to try again");
        assert_eq!(
            body,
            json!({
                "error": "The request took longer than the server allows (300 s) and was stopped.",
                "code": "deadline_exceeded",
            })
        );
    }

    #[test]
    fn a_draining_hosts_health_says_when_to_try_again() {
        let draining = HostStatus { application: "gatehouse", draining: true };
        let response = host_response(well_known::answer(&draining, "/.well-known/spin/health"));
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        let retry_after = response.headers().get(http::header::RETRY_AFTER).and_then(|value| value.to_str().ok());
        assert_eq!(retry_after, Some(gatehouse_domain::RETRY_AFTER_SECONDS));
    }

    #[tokio::test]
    async fn any_other_failure_is_a_500_that_keeps_its_text_to_the_log() {
        let failed = anyhow::anyhow!("wasm trap: postgres://secret@db/x unreachable");
        let (status, content_type, retry_after, body) = read(failure_response(&failed)).await;
        assert_eq!(retry_after, None, "a 500 names no time to retry");
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(content_type, "application/json");
        assert_eq!(body["code"], "internal");
        assert!(!body.to_string().contains("secret"), "{body}");
        assert!(body["error"].as_str().is_some_and(|sentence| !sentence.is_empty()), "{body}");
    }
}
