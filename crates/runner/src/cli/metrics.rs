//! `gatehouse metrics serve`: the database's gauges at `/metrics`, for a deployment whose
//! components run under Spin, where no `gatehouse up` serves them (docs/observability.md).
use std::net::SocketAddr;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::metrics::MetricsServer;

#[derive(Subcommand)]
pub(crate) enum MetricsCommand {
    /// Serve `GET /metrics` in Prometheus' text format: calls waiting in each state and the
    /// oldest, calls the sweeper owes, owed reports, read from DATABASE_URL at each scrape.
    Serve(ServeArgs),
}

#[derive(Args)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9464", env = "GATEHOUSE_METRICS_LISTEN")]
    listen: SocketAddr,
    /// The application's database.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
}

pub(crate) async fn run(command: MetricsCommand) -> Result<()> {
    let MetricsCommand::Serve(args) = command;
    let (server, address) =
        MetricsServer::start(args.listen, prometheus::Registry::new(), None, args.database_url).await?;
    println!("Gatehouse metrics on http://{address}/metrics");
    super::up::shutdown_signal().await;
    server.stop().await;
    Ok(())
}
