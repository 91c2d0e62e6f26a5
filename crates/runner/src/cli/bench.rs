//! `gatehouse bench`: the arguments of the benchmark of `gatehouse-bench`, and the in-process
//! application it measures when no `--url` is given, started exactly as `up` does (same
//! database choice, same migrations) but with no background sweeps.
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use super::AppArgs;
use super::up::{self, UpArgs};

#[derive(Args)]
pub(super) struct BenchCommand {
    #[command(flatten)]
    pub(crate) app: AppArgs,
    #[command(flatten)]
    pub(crate) bench: gatehouse_bench::BenchArgs,
}

pub(super) async fn run(command: BenchCommand) -> Result<()> {
    gatehouse_bench::run(command.bench, &InProcess { app: command.app }).await
}

/// Starts the application as `up` does, for the benchmark.
struct InProcess {
    app: AppArgs,
}

impl gatehouse_bench::Harness for InProcess {
    type Running = up::Running;

    fn dev_token(&self) -> &str {
        up::DEV_TOKEN
    }

    fn callback_secret(&self) -> &str {
        up::DEV_CALLBACK_SECRET
    }

    fn project_home(&self) -> Result<PathBuf> {
        Ok(crate::db::project_home(&self.app.project_root()?))
    }

    /// As the runner's `fermyon:spin/llm` host and `ingest` look for it: beside the manifest,
    /// then at the project's root (or where `GATEHOUSE_MODEL_DIR` says).
    fn model_dir(&self) -> Result<PathBuf> {
        let root = self.app.project_root()?;
        Ok(gatehouse_embeddings::locate_model_dir(None, &[&root, &self.project_home()?])?)
    }

    async fn start(&self) -> Result<up::Running> {
        let up_args = UpArgs {
            app: self.app.clone(),
            listen: "127.0.0.1:0".parse()?,
            variables: vec![format!("api_token={}", up::DEV_TOKEN)],
            max_body_bytes: 1 << 20,
            pg_pool_size: 32,
            // No background sweeps: the measured latencies are the routes' own.
            sweep_interval: std::time::Duration::ZERO,
            sweep_component: "sweeper".into(),
            model_dir: None,
            guest_limits: up::GuestLimits::default(),
            connection_limits: up::ConnectionArgs::default(),
            component_ids: Vec::new(),
            refuse_zero_row_queries: false,
            drain_delay: std::time::Duration::ZERO,
            metrics_listen: None,
        };
        up::start(&up_args).await
    }
}

impl gatehouse_bench::Running for up::Running {
    fn address(&self) -> SocketAddr {
        self.address
    }

    fn database_url(&self) -> &str {
        up::Running::database_url(self)
    }

    async fn stop(self) -> Result<()> {
        up::Running::stop(self).await
    }
}
