//! The application with the `vector-query` tool, on a database of its own that holds exactly
//! the sample knowledge base (examples/knowledge-base.jsonl), and an OpenAI-compatible
//! embeddings server.
//!
//! The knowledge base lives in a separate database on the test server, so documents other
//! tests ingest never show up in a search, and the totals the tests compute are exact. It is
//! loaded once with `gatehouse ingest` and loaded again only when the file changes.

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail, ensure};
use gatehouse_embeddings::Embedder;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::lifecycle::{App, CALLBACK_SECRET};
use crate::{Runner, RunnerOptions, app_manifest, connect, database_url, gatehouse_bin, workspace_root};

/// The tool's registry entry, as spin.toml ships it.
pub const VECTOR_REGISTRY: &str = "query_vector_db=vector-query";
const DATABASE: &str = "gatehouse_vector_search";
/// Serializes the set-up of [`DATABASE`] across test processes.
const SETUP_LOCK: i64 = 0x7665_6374_6f72;

pub fn knowledge_base_file() -> PathBuf {
    workspace_root().join("examples/knowledge-base.jsonl")
}

/// The labelled queries: `{query, filters?, expected_id}`.
pub fn labelled_queries() -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(workspace_root().join("examples/labelled-queries.json"))?;
    let parsed: Value = serde_json::from_str(&text)?;
    parsed["queries"].as_array().cloned().context("labelled-queries.json has no queries list")
}

/// Every document of the knowledge base, as the file has it.
pub fn knowledge_base() -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(knowledge_base_file())?;
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| Ok(serde_json::from_str(l)?)).collect()
}

/// `DATABASE_URL` with another database name.
/// `url` with its database name replaced by `name`.
pub fn with_database(url: &str, name: &str) -> Result<String> {
    let (base, query) = url.split_once('?').map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map(|i| i + 3).context("DATABASE_URL has no scheme")?;
    let path = base[after_scheme..].find('/').map(|i| after_scheme + i).unwrap_or(base.len());
    let mut renamed = format!("{}/{name}", &base[..path]);
    if let Some(query) = query {
        renamed.push('?');
        renamed.push_str(query);
    }
    Ok(renamed)
}

/// The URL of the knowledge-base database, created, migrated and loaded if need be.
pub async fn knowledge_base_database() -> Result<String> {
    let url = with_database(&database_url(), DATABASE)?;
    let admin = crate::db().await?;
    admin.execute("SELECT pg_advisory_lock($1)", &[&SETUP_LOCK]).await?;
    let prepared = prepare(&admin, &url).await;
    admin.execute("SELECT pg_advisory_unlock($1)", &[&SETUP_LOCK]).await?;
    prepared.map(|()| url)
}

async fn prepare(admin: &tokio_postgres::Client, url: &str) -> Result<()> {
    let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&DATABASE]).await?.is_some();
    if !exists {
        admin.batch_execute(&format!("CREATE DATABASE {DATABASE}")).await?;
    }
    gatehouse(&["migrate"], url)?;
    let db = connect(url).await?;
    let file = std::fs::read_to_string(knowledge_base_file())?;
    db.batch_execute("CREATE TABLE IF NOT EXISTS knowledge_base_loaded (content text NOT NULL)").await?;
    let loaded = db.query_opt("SELECT 1 FROM knowledge_base_loaded WHERE content = $1", &[&file]).await?.is_some();
    if loaded {
        return Ok(());
    }
    gatehouse(&["ingest", &knowledge_base_file().to_string_lossy()], url)?;
    let ids: Vec<String> = knowledge_base()?.iter().filter_map(|d| d["id"].as_str().map(str::to_owned)).collect();
    // The first tenant's: a test may load the same documents for a tenant of its own.
    db.execute("DELETE FROM documents WHERE tenant_id = 'default' AND NOT (id = ANY($1))", &[&ids]).await?;
    let count: i64 = db.query_one("SELECT count(*) FROM documents WHERE tenant_id = 'default'", &[]).await?.get(0);
    ensure!(count as usize == ids.len(), "{count} documents loaded, the file has {}", ids.len());
    db.execute("DELETE FROM knowledge_base_loaded", &[]).await?;
    db.execute("INSERT INTO knowledge_base_loaded (content) VALUES ($1)", &[&file]).await?;
    Ok(())
}

pub fn gatehouse(args: &[&str], url: &str) -> Result<()> {
    let output = std::process::Command::new(gatehouse_bin())
        .args(args)
        .env("DATABASE_URL", url)
        .current_dir(workspace_root())
        .output()
        .with_context(|| format!("running gatehouse {}", args.join(" ")))?;
    if !output.status.success() {
        bail!("gatehouse {} failed: {}", args.join(" "), String::from_utf8_lossy(&output.stderr));
    }
    Ok(())
}

/// The shipped application (spin.toml) on the knowledge-base database; `extra` variables
/// override the defaults.
pub async fn start(extra: &[(&str, &str)]) -> Result<(App, String)> {
    start_on(None, extra).await
}

/// [`start`], served by `binary` (a pinned host, say) instead of the runner.
pub async fn start_on(binary: Option<PathBuf>, extra: &[(&str, &str)]) -> Result<(App, String)> {
    let url = knowledge_base_database().await?;
    let mut variables: Vec<(String, String)> = vec![
        ("tool_registry".into(), VECTOR_REGISTRY.into()),
        ("callback_secret".into(), CALLBACK_SECRET.into()),
        // Short gates: the unreachable-relay test waits for one to time out.
        ("gate_timeout_seconds".into(), "2".into()),
    ];
    for (name, value) in extra {
        variables.retain(|(n, _)| n != name);
        variables.push(((*name).into(), (*value).into()));
    }
    let options = RunnerOptions {
        variables,
        env: vec![("DATABASE_URL".into(), url.clone())],
        extra_args: vec!["--sweep-interval".into(), "0".into()],
        binary,
        ..Default::default()
    };
    let runner = Runner::start(&app_manifest(), options)?;
    Ok((App { runner, http: reqwest::Client::new(), database_url: url.clone() }, url))
}

/// What the embeddings server was asked.
#[derive(Debug, Clone)]
pub struct EmbeddingsRequest {
    pub authorization: Option<String>,
    pub body: Value,
}

/// An OpenAI-compatible `POST /v1/embeddings` that computes real all-MiniLM-L6-v2 vectors, so
/// a search through it finds what the host's model finds. Answers 401 to any other key.
pub struct EmbeddingsServer {
    pub url: String,
    pub host: String,
    requests: Arc<Mutex<Vec<EmbeddingsRequest>>>,
}

impl EmbeddingsServer {
    pub async fn start(api_key: &str) -> Result<EmbeddingsServer> {
        let model_dir = gatehouse_embeddings::locate_model_dir(None, &[&workspace_root()])?;
        let embedder = Arc::new(tokio::task::spawn_blocking(move || Embedder::load(&model_dir)).await??);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let host = listener.local_addr()?.to_string();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (sink, expected) = (requests.clone(), Arc::new(format!("Bearer {api_key}")));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (sink, expected, embedder) = (sink.clone(), expected.clone(), embedder.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |request: hyper::Request<Incoming>| {
                        let (sink, expected, embedder) = (sink.clone(), expected.clone(), embedder.clone());
                        async move { Ok::<_, Infallible>(answer(request, &sink, &expected, embedder).await) }
                    });
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(EmbeddingsServer { url: format!("http://{host}/v1/embeddings"), host, requests })
    }

    pub fn requests(&self) -> Vec<EmbeddingsRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

async fn answer(
    request: hyper::Request<Incoming>,
    sink: &Mutex<Vec<EmbeddingsRequest>>,
    expected: &str,
    embedder: Arc<Embedder>,
) -> hyper::Response<Full<Bytes>> {
    let authorization = request.headers().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let path = request.uri().path().to_owned();
    let bytes = request.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if let Ok(mut requests) = sink.lock() {
        requests.push(EmbeddingsRequest { authorization: authorization.clone(), body: body.clone() });
    }
    let reply = |status: u16, body: Value| {
        let mut response = hyper::Response::new(Full::new(Bytes::from(body.to_string())));
        *response.status_mut() =
            hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        response
    };
    if path != "/v1/embeddings" {
        return reply(404, json!({"error": {"message": "not found"}}));
    }
    if authorization.as_deref() != Some(expected) {
        return reply(
            401,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
        );
    }
    let inputs: Vec<String> = match &body["input"] {
        Value::String(text) => vec![text.clone()],
        Value::Array(texts) => texts.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect(),
        _ => return reply(400, json!({"error": {"message": "input is required"}})),
    };
    let computed = tokio::task::spawn_blocking(move || {
        let texts: Vec<&str> = inputs.iter().map(String::as_str).collect();
        embedder.embed(&texts).map_err(|e| e.to_string())
    })
    .await;
    match computed {
        Ok(Ok(vectors)) => {
            let data: Vec<Value> = vectors
                .into_iter()
                .enumerate()
                .map(|(index, embedding)| json!({"object": "embedding", "index": index, "embedding": embedding}))
                .collect();
            reply(
                200,
                json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 0, "total_tokens": 0}}),
            )
        }
        Ok(Err(e)) => reply(500, json!({"error": {"message": e}})),
        Err(e) => reply(500, json!({"error": {"message": e.to_string()}})),
    }
}
