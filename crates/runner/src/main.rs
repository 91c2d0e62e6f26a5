//! `gatehouse`: the Gatehouse CLI. It builds the components, migrates the database, serves the
//! application (`up`, on the Spin host of `gatehouse-spin-host`, with the periodic sweep, the
//! database and the dev-mode defaults added), loads documents, replays the demo conversation and
//! runs the benchmark of `gatehouse-bench`.
//!
//! It may depend on the runner side's crates (`gatehouse-spin-host`, `gatehouse-bench`,
//! `gatehouse-embedded-pg`, `gatehouse-fake-gmail`, `gatehouse-embeddings`) and anything else;
//! nothing depends on it.
mod cli;
mod db;
mod metrics;
mod sweep;
mod telemetry;

use clap::Parser;

/// The host allocates and frees many small buffers per request (headers, bodies, resource
/// tables, JSON); mimalloc's per-thread free lists do that with less CPU than glibc's malloc
/// (measured on the create at 16 clients: 0.552 to 0.504 ms of runner CPU per create, +7%
/// creates/s; docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = cli::Cli::parse();
    gatehouse_spin_host::log::debug_from_env("GATEHOUSE_LOG");
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli.run()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
