//! The `gatehouse` command line.
mod bench;
mod build;
mod demo;
mod dev_gmail;
mod embeddings;
mod index;
mod ingest;
mod keys;
mod metrics;
mod new;
mod registration;
mod tenants;
mod tools;
mod up;

pub(crate) use up::{DEV_CALLBACK_SECRET, DEV_TOKEN};

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use gatehouse_migrations::ContractSteps;

#[derive(Parser)]
#[command(name = "gatehouse", version, about = "Runs and operates the Gatehouse Spin application")]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct MigrateArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Stop after this migration (its number, as in `V24__...`): an upgrade in stages
    /// (docs/deploying.md, "Upgrading"). The tools' own migrations wait for a migrate without it.
    #[arg(long, value_name = "VERSION")]
    to: Option<i32>,
    /// Apply the contract steps too: migrations that remove what an earlier release still uses.
    /// Only once no runner of an earlier release serves (docs/deploying.md, "Upgrading").
    #[arg(long)]
    contract: bool,
    /// Apply nothing: say what each migration would lock, on how many rows, and whether the work
    /// under the lock grows with the table, rehearsed on a scratch database (the database's user
    /// needs CREATEDB).
    #[arg(long)]
    plan: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Build every component, running each one's `[component.x.build] command` as `spin build` does.
    Build(AppArgs),
    /// Apply the database migrations (to DATABASE_URL, or to the embedded database).
    Migrate(MigrateArgs),
    /// Serve the application (embedded PostgreSQL unless DATABASE_URL is set).
    Up(up::UpArgs),
    /// Load documents from a JSONL file into the `documents` table, embedded with
    /// all-minilm-l6-v2 (migrates first; re-running on the same file changes nothing).
    Ingest(ingest::IngestArgs),
    /// Build the documents' nearest-neighbour indexes for the documents loaded: one over all of
    /// them and, with `--by KEY`, one per value of a metadata key (docs/architecture.md).
    Index(index::IndexArgs),
    /// Serve the embedding model over an OpenAI-compatible `/v1/embeddings`, for Spin hosts
    /// without a local model (docs/embeddings.md).
    #[command(subcommand)]
    Embeddings(embeddings::EmbeddingsCommand),
    /// Serve the database's gauges (calls waiting, the sweeper's lag, owed reports) at
    /// `/metrics`, for deployments whose components run under Spin (docs/observability.md).
    #[command(subcommand)]
    Metrics(metrics::MetricsCommand),
    /// Replay the seed's conversation (wrong address, corrected, confirmed, checkpoint, sent)
    /// against a running application, with a built-in relay, printing each step.
    Demo(demo::DemoArgs),
    /// Measure latency and throughput of the running application's routes.
    Bench(bench::BenchCommand),
    /// Start or stop the embedded PostgreSQL on its own, for tests and tools.
    #[command(subcommand)]
    Db(DbCommand),
    /// Tools: check declaration files or running tools (the conformance kit), or add a
    /// declared tool to the manifest.
    #[command(subcommand, visible_alias = "tool")]
    Tools(tools::ToolsCommand),
    /// API keys: create, list, rotate and revoke a tenant's scoped keys (docs/keys.md).
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Tenants: add them, list them, and set their limits (docs/keys.md).
    #[command(subcommand)]
    Tenants(tenants::TenantsCommand),
    /// Start something new from a template: `gatehouse new tool NAME --lang python|typescript|rust`.
    #[command(subcommand)]
    New(new::NewCommand),
}

#[derive(Subcommand)]
enum DbCommand {
    /// Start it (or find it running) and print `DATABASE_URL=...` for a shell to eval.
    Start(AppArgs),
    /// Stop it.
    Stop(AppArgs),
}

/// Where the application is.
#[derive(Args, Clone)]
pub(crate) struct AppArgs {
    /// The Spin manifest.
    #[arg(long, short = 'f', default_value = "spin.toml", env = "GATEHOUSE_MANIFEST")]
    pub(crate) manifest: PathBuf,
    /// Folder for the embedded database and compiled components (default: `.gatehouse/` of
    /// the project, found at or above the manifest's folder).
    #[arg(long, env = "GATEHOUSE_STATE_DIR")]
    pub(crate) state_dir: Option<PathBuf>,
}

impl AppArgs {
    pub(crate) fn manifest_path(&self) -> Result<PathBuf> {
        std::path::absolute(&self.manifest).context("resolving the manifest path")
    }

    pub(crate) fn project_root(&self) -> Result<PathBuf> {
        Ok(self.manifest_path()?.parent().map(Path::to_path_buf).unwrap_or_default())
    }

    pub(crate) fn state_dir(&self) -> Result<PathBuf> {
        match &self.state_dir {
            Some(dir) => std::path::absolute(dir).context("resolving the state folder"),
            None => Ok(crate::db::project_home(&self.project_root()?).join(".gatehouse")),
        }
    }
}

impl Cli {
    pub(crate) async fn run(self) -> Result<()> {
        match self.command {
            Command::Build(args) => build::run(&args).await,
            Command::Migrate(MigrateArgs { app: args, to, contract, plan }) => {
                let database = crate::db::Database::open(&args.project_root()?, &args.state_dir()?).await?;
                let contract = if contract { ContractSteps::Apply } else { ContractSteps::WhenNew };
                if plan {
                    print!("{}", crate::db::plan(&database.url, to, contract).await?);
                    return database.stop();
                }
                // A tool's own migrations are named in the manifest; where there is none (the
                // CLI image's migrate job), the core's are all there is.
                let manifest = args.manifest_path()?;
                let manifest = if manifest.exists() {
                    Some(manifest)
                } else {
                    eprintln!("no manifest at {}: applying the core's migrations only", manifest.display());
                    None
                };
                let outcome = crate::db::migrate_up_to(&database.url, manifest.as_deref(), to, contract).await?;
                for migration in &outcome.applied {
                    println!("applied {migration}");
                }
                if !outcome.waiting.is_empty() {
                    println!(
                        "left for `gatehouse migrate --contract`, once no earlier release serves: {}",
                        outcome.waiting.join(", ")
                    );
                } else if outcome.applied.is_empty() {
                    println!("database is up to date");
                }
                database.stop()
            }
            Command::Up(args) => up::run(args).await,
            Command::Ingest(args) => ingest::run(args).await,
            Command::Index(args) => index::run(args).await,
            Command::Embeddings(command) => embeddings::run(command).await,
            Command::Metrics(command) => metrics::run(command).await,
            Command::Bench(args) => bench::run(args).await,
            Command::Demo(args) => demo::run(args).await,
            Command::Db(DbCommand::Start(args)) => {
                let url = crate::db::start_detached(&args.project_root()?, &args.state_dir()?)?;
                println!("DATABASE_URL={url}");
                Ok(())
            }
            Command::Db(DbCommand::Stop(args)) => crate::db::stop_embedded(&args.project_root()?, &args.state_dir()?),
            Command::Tools(command) => tools::run(command).await,
            Command::New(command) => new::run(command),
            Command::Keys(command) => keys::run(command).await,
            Command::Tenants(command) => tenants::run(command).await,
        }
    }
}
