//! `gatehouse embeddings serve`: the project's own model behind an OpenAI-compatible
//! `/v1/embeddings`, for Spin hosts without a local one (docs/embeddings.md).
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use gatehouse_embeddings::{Embedder, MODEL_NAME, locate_model_dir};
use gatehouse_embeddings_server::{Config, Server};

use super::AppArgs;
use crate::db::project_home;

#[derive(Subcommand)]
pub(crate) enum EmbeddingsCommand {
    /// Serve all-minilm-l6-v2 at `POST /v1/embeddings`, OpenAI's request and answer, batching
    /// concurrent requests; every request but `GET /healthz` needs the bearer token.
    Serve(ServeArgs),
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The token clients send as `Authorization: Bearer <token>`. Give it in the environment,
    /// where no process list shows it.
    #[arg(long, env = "GATEHOUSE_EMBEDDINGS_TOKEN", hide_env_values = true)]
    token: String,
    /// Folder holding the all-minilm-l6-v2 model files (default: `.spin/ai-models/all-minilm-l6-v2`
    /// beside the manifest, else at the project root).
    #[arg(long, value_name = "DIR", env = "GATEHOUSE_MODEL_DIR")]
    model_dir: Option<PathBuf>,
    /// Most texts embedded together.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..=4096))]
    max_batch: u16,
    /// Most requests waiting for the model; beyond it a request is refused with 503 at once.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=4096))]
    queue: u16,
}

pub(crate) async fn run(command: EmbeddingsCommand) -> Result<()> {
    let EmbeddingsCommand::Serve(args) = command;
    let manifest_dir = args.app.project_root()?;
    let model_dir = locate_model_dir(args.model_dir.as_deref(), &[&manifest_dir, &project_home(&manifest_dir)])?;
    let embedder = tokio::task::spawn_blocking(move || Embedder::load(&model_dir))
        .await
        .context("model loading task")?
        .context("loading the embedding model")?;
    let config = Config {
        max_batch_texts: usize::from(args.max_batch),
        queue: usize::from(args.queue),
        ..Config::new(args.token)
    };
    let server = Server::start(args.listen, Arc::new(embedder), config).await?;
    println!("serving {MODEL_NAME} embeddings at {}", server.embeddings_url());
    super::up::shutdown_signal().await;
    server.stop().await;
    Ok(())
}
