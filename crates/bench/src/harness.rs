//! What the benchmark needs from the program that runs it (the `gatehouse` CLI): how to start
//! the application in-process, and the project's secrets and folders.
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;

/// What the benchmark needs from the program that runs it.
pub trait Harness {
    /// An application [`Harness::start`] started.
    type Running: Running;
    /// The API token of the application `start` starts, and the one used with `--url` when no
    /// `--token` is given.
    fn dev_token(&self) -> &str;
    /// The key the application signs its callbacks with, which the lifecycle scenarios' relay
    /// verifies.
    fn callback_secret(&self) -> &str;
    /// The project's folder, where pgbench is looked for (as the embedded PostgreSQL is).
    fn project_home(&self) -> Result<PathBuf>;
    /// Where the embedding model is, found as the application's runner finds it (for `embed`).
    fn model_dir(&self) -> Result<PathBuf>;
    /// Starts the application in-process, as `up` does, with no background sweeps.
    fn start(&self) -> impl Future<Output = Result<Self::Running>>;
}

/// An application started for the benchmark.
pub trait Running {
    /// Where it listens.
    fn address(&self) -> SocketAddr;
    /// Its database.
    fn database_url(&self) -> &str;
    /// Stops it, letting running guests finish.
    fn stop(self) -> impl Future<Output = Result<()>>;
}
