//! A loaded application: its components compiled and pre-instantiated, its routing table, and
//! the dispatch of one request to one component in a fresh store.
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use anyhow::{Context, Result};
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;
use wasmtime::Store;
use wasmtime::component::Linker;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::Scheme;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;
use wasmtime_wasi_http::{Error as HttpError, WasiHttpView};

use crate::host::{self, ComponentRuntime, HostState, LocalModels, PgPools};
use crate::manifest::Manifest;
use crate::outbound::AllowedHosts;
use crate::routing::{RouteMatch, Router};
use crate::variables::{ResolvedVariables, VariableSources};

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
}

struct LoadedComponent {
    pre: ProxyPre<HostState>,
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
    this: Weak<App>,
}

/// Where a request came from: a client over the network, or another component by chaining.
pub enum Origin {
    Client(SocketAddr),
    Chained,
}

impl App {
    pub fn load(config: AppConfig) -> Result<Arc<App>> {
        let manifest = Manifest::load(&config.manifest_path)?;
        let manifest_dir = config.manifest_path.parent().map(Path::to_path_buf).unwrap_or_default();
        let variables = ResolvedVariables::resolve(&manifest, &config.variables)?;
        let router = Router::new(&manifest.trigger.http)?;
        let engine = crate::engine::new_engine()?;
        let mut linker = Linker::new(&engine);
        host::add_to_linker(&mut linker)?;
        let models = local_models(&manifest, &manifest_dir, config.model_dir.clone());

        let mut components = HashMap::new();
        for (id, decl) in &manifest.component {
            let source = manifest.source_path(&manifest_dir, id).context("component source")?;
            let component = crate::engine::load_component(&engine, &source, &config.cache_dir)
                .with_context(|| format!("loading component '{id}' from {}", source.display()))?;
            let pre = ProxyPre::new(linker.instantiate_pre(&component)?)
                .map_err(anyhow::Error::from)
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
                allowed_hosts: AllowedHosts::parse(&allowed).with_context(|| format!("component '{id}'"))?,
                environment: decl.environment.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                ai_models: decl.ai_models.clone(),
                models: models.clone(),
            };
            components.insert(id.clone(), LoadedComponent { pre, runtime: Arc::new(runtime) });
        }
        let name = manifest.application.name.clone();
        Ok(Arc::new_cyclic(|this| App {
            name,
            guests: tokio_util::task::TaskTracker::new(),
            router,
            components,
            pg: Arc::new(PgPools::new(config.pg_pool_size)),
            max_body_bytes: config.max_body_bytes,
            this: this.clone(),
        }))
    }

    /// Waits up to `grace` for running guests to finish; true if they all did.
    pub async fn drain(&self, grace: std::time::Duration) -> bool {
        self.guests.close();
        tokio::time::timeout(grace, self.guests.wait()).await.is_ok()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn component_ids(&self) -> impl Iterator<Item = &str> {
        self.components.keys().map(String::as_str)
    }

    /// Serves a request from the network: public routes only.
    pub async fn handle_inbound(
        &self,
        request: Request<hyper::body::Incoming>,
        client: SocketAddr,
    ) -> Response<HyperOutgoingBody> {
        let path = request.uri().path().to_owned();
        let Some(route) = self.router.route(&path) else {
            return plain(StatusCode::NOT_FOUND, "not found");
        };
        let (parts, body) = request.into_parts();
        let body = match http_body_util::Limited::new(body, self.max_body_bytes).collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => {
                return plain(StatusCode::PAYLOAD_TOO_LARGE, "request body too large");
            }
            Err(_) => return plain(StatusCode::BAD_REQUEST, "could not read request body"),
        };
        let request = Request::from_parts(parts, Full::new(body));
        match self.dispatch(route, request, Origin::Client(client)).await {
            Ok(response) => response,
            Err(e) => internal_error(&e),
        }
    }

    /// Serves `http://<component>.spin.internal/...` for another component.
    pub async fn dispatch_chained(
        &self,
        component: &str,
        request: Request<wasmtime_wasi_http::WasiBody>,
    ) -> Result<Response<HyperOutgoingBody>, HttpError> {
        if !self.components.contains_key(component) {
            return Err(HttpError::DestinationNotFound);
        }
        let route = RouteMatch::chained(component, request.uri().path());
        match self.dispatch(route, request, Origin::Chained).await {
            Ok(response) => Ok(response),
            Err(e) => Ok(internal_error(&e)),
        }
    }

    async fn dispatch<B>(
        &self,
        route: RouteMatch,
        mut request: Request<B>,
        origin: Origin,
    ) -> Result<Response<HyperOutgoingBody>>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<HttpError>,
    {
        let component = self.components.get(&route.component).context("routed to an unknown component")?;
        set_spin_headers(&mut request, &route, &origin);
        let state = HostState::new(self.this.clone(), component.runtime.clone(), self.pg.clone());
        let mut store = Store::new(component.pre.engine(), state);
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let incoming = store.data_mut().http().new_incoming_request(Scheme::Http, request)?;
        let outparam = store.data_mut().http().new_response_outparam(sender)?;
        let pre = component.pre.clone();
        let id = component.runtime.id.clone();
        // The guest runs in its own task so it can keep working after it has sent its response,
        // as Spin allows; the store lives as long as that task.
        let task = self.guests.spawn(async move {
            let proxy = pre.instantiate_async(&mut store).await?;
            proxy.wasi_http_incoming_handler().call_handle(&mut store, incoming, outparam).await?;
            anyhow::Ok(())
        });
        match receiver.await {
            Ok(Ok(response)) => {
                tokio::spawn(log_guest_end(id, task));
                Ok(response)
            }
            Ok(Err(code)) => Err(anyhow::anyhow!("component '{id}' answered with an error: {code:?}")),
            Err(_) => {
                let error = match task.await {
                    Ok(Ok(())) => anyhow::anyhow!("component '{id}' returned without sending a response"),
                    Ok(Err(e)) => e.context(format!("component '{id}' failed")),
                    Err(e) => anyhow::anyhow!("component '{id}' task failed: {e}"),
                };
                Err(error)
            }
        }
    }
}

/// The embedding model the components may share. It loads on first use; a component that lists
/// it when its files are missing is told at start-up rather than on its first request.
fn local_models(manifest: &Manifest, manifest_dir: &Path, explicit: Option<PathBuf>) -> Arc<LocalModels> {
    let project_root = crate::db::project_home(manifest_dir);
    let mut roots = vec![manifest_dir.to_path_buf()];
    if project_root != manifest_dir {
        roots.push(project_root);
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

/// Logs a guest that fails after it has already answered: its caller has its response, but
/// the failure of the work it went on with must not vanish.
async fn log_guest_end(id: Arc<str>, task: tokio::task::JoinHandle<Result<()>>) {
    match task.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => crate::log::error(
            "component failed after responding",
            json!({"component": &*id, "error": format!("{e:#}")}),
        ),
        Err(e) => crate::log::error(
            "component task failed after responding",
            json!({"component": &*id, "error": e.to_string()}),
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

pub fn plain(status: StatusCode, text: &str) -> Response<HyperOutgoingBody> {
    let body = Full::new(Bytes::from(text.to_owned())).map_err(|never| match never {}).boxed_unsync();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn internal_error(error: &anyhow::Error) -> Response<HyperOutgoingBody> {
    crate::log::error("request failed", json!({"error": format!("{error:#}")}));
    plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
}
