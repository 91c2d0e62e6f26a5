//! The Gatehouse benchmark, and the relay that takes the application's callbacks.
//!
//! `gatehouse bench`: latency percentiles and throughput of the application's routes, over
//! real HTTP on loopback against a real database.
//!
//! Without `--url` it starts the application in-process exactly as `up` does (same database
//! choice, same migrations), seeds the data the routes read, measures, and shuts down. Its own
//! clients then run on a runtime of their own, so each level also prints the CPU per request
//! of the runner (this process less the clients' threads) and of PostgreSQL (see [`cpu`]).
//!
//! The lifecycle scenarios (`create`, `modify`, `cancel`, `status`, `flow`) need a tool: run
//! them on tests/fixtures/lifecycle.toml, the application plus the test-only fixture tool.
//! The `query` scenario runs the vector-search tool over the documents already ingested. The
//! `embed` scenario runs the embedding model alone, in this process, on those documents, and
//! prints its share of the machine's matrix rate measured in the same run. The `embed-serve`
//! scenario starts the embeddings server in this process and measures its documents a second
//! with concurrent clients, beside the model embedding the same documents here. The `recall`
//! scenario runs the vector tool's own search statement through the index and exactly, and
//! prints recall@10 under a range of filters.
//!
//! The program that runs it (the `gatehouse` CLI) parses [`BenchArgs`] and hands [`run`] a
//! [`Harness`]: how to start the application in-process, and the project's dev token, callback
//! secret, home folder and model folder. This crate may depend on `gatehouse-pg-connect` (to
//! connect to the database), `gatehouse-embedded-pg` (to find pgbench),
//! `gatehouse-embeddings` (for `embed`), `gatehouse-embeddings-server` (for `embed-serve`),
//! `gatehouse-vector-search` (for `recall`: the tool's
//! search statement) and `gatehouse-domain`, the HTTP client and server
//! crates and PostgreSQL; never on the CLI.
//!
//! One module per concern, each importing only those it builds on: `timing` (histograms and
//! percentiles), `args`, `harness`, `scenario`, `sessions`, `load` (the clients at one level),
//! `lifecycle`, `query`, `embed`, `embed_serve` and `recall` (the scenarios that need a set-up),
//! `setup`, `measure`,
//! `floor` (pgbench), `report`, and `run`, which strings them together.
#![warn(unreachable_pub)]

mod args;
pub mod cpu;
mod embed;
mod embed_serve;
mod floor;
mod harness;
mod lifecycle;
mod load;
mod measure;
mod query;
mod recall;
mod relay;
mod report;
mod run;
mod scenario;
mod seed;
mod sessions;
mod setup;
mod timing;

pub use args::BenchArgs;
pub use harness::{Harness, Running};
pub use relay::{Callback, LOCAL_RELAY, Relay};
pub use run::run;
