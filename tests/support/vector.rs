//! The application with the `vector-query` tool, on a database of its own that holds exactly
//! the sample knowledge base (examples/knowledge-base.jsonl), and `gatehouse embeddings serve`.
//!
//! The knowledge base lives in a separate database on the test server, so documents other
//! tests ingest never show up in a search, and the totals the tests compute are exact. It is
//! loaded once with `gatehouse ingest` and loaded again only when the file changes.

use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

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

/// `gatehouse embeddings serve` on a free port, with the project's model and `token`; stopped
/// when dropped.
pub struct EmbeddingsServer {
    /// `http://127.0.0.1:PORT/v1/embeddings`
    pub url: String,
    /// `127.0.0.1:PORT`
    pub host: String,
    child: std::process::Child,
}

impl EmbeddingsServer {
    pub async fn start(token: &str) -> Result<EmbeddingsServer> {
        EmbeddingsServer::start_with(token, &[]).await
    }

    /// [`EmbeddingsServer::start`] with more options (`--queue 1`, say).
    pub async fn start_with(token: &str, options: &[&str]) -> Result<EmbeddingsServer> {
        let model_dir = gatehouse_embeddings::locate_model_dir(None, &[&workspace_root()])?;
        let mut child = std::process::Command::new(gatehouse_bin())
            .args(["embeddings", "serve", "--listen", "127.0.0.1:0", "--model-dir"])
            .arg(&model_dir)
            .args(options)
            .env("GATEHOUSE_EMBEDDINGS_TOKEN", token)
            .current_dir(workspace_root())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .context("starting gatehouse embeddings serve")?;
        let stdout = child.stdout.take().context("no stdout")?;
        // The first line names the address once the model is loaded and the port bound.
        let first = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            tokio::task::spawn_blocking(move || {
                let mut line = String::new();
                std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).map(|_| line)
            }),
        )
        .await;
        let line = match first {
            Ok(Ok(Ok(line))) => line,
            _ => {
                let _ = child.kill();
                bail!("gatehouse embeddings serve printed no address within a minute");
            }
        };
        let url = line.split(" at ").nth(1).map(str::trim).unwrap_or_default().to_owned();
        let host = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
        ensure!(url.ends_with("/v1/embeddings") && !host.is_empty(), "unexpected first line {line:?}");
        Ok(EmbeddingsServer { url, host, child })
    }
}

impl Drop for EmbeddingsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
