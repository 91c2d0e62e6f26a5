//! The database schema: every file of the workspace's `migrations/` folder, embedded when this
//! crate compiles, applied in order by [`apply`]. The CLI's `gatehouse migrate` and `up` use it.
//! docs/architecture.md describes the data model the migrations build.

mod online;
mod plan;
mod tool;

pub use plan::{Plan, PlannedMigration, plan};
pub use tool::{ToolMigrations, apply_tool, schema_of};

mod embedded {
    refinery::embed_migrations!("../../migrations");
}

/// Migrations changed after they shipped, with the checksum a database recorded when it applied
/// the version it shipped with. Refinery refuses a database whose recorded checksum differs from
/// the file's; for these the record is brought up to date first, so a database migrated before
/// the change keeps working. Only these kinds of change are made this way: comments reworded
/// (V3, V7); a migration made add-only, whose removals moved to a contract step that finds them
/// already done on such a database (V18 and V27, whose removals are V32's); and a check left
/// unvalidated for a later migration to validate without blocking requests (V29, V31). Any
/// other change to a shipped migration is a new migration.
const SUPERSEDED: &[(i32, u64)] = &[
    (3, 6_774_735_324_130_314_924),
    (7, 658_664_620_846_305_447),
    (18, 8_651_253_078_910_817_662),
    (27, 10_663_324_581_529_883_966),
    (29, 2_257_127_830_545_474_819),
];

/// How a migration is named when it removes what an earlier release still uses (a column, an
/// index, a key it names): a contract step, which waits until no runner of such a release serves.
const CONTRACT_PREFIX: &str = "contract_";

/// Whether the contract steps run (docs/deploying.md, "Upgrading").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContractSteps {
    /// Only on a database that had no migration applied, where no earlier release can be serving;
    /// elsewhere `apply` stops before the first one.
    WhenNew,
    /// The operator says no runner of an earlier release serves any more.
    Apply,
}

/// What [`apply_up_to`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The migrations it applied, in order (`V18__tenant_rows`).
    pub applied: Vec<String>,
    /// The contract step it stopped before, and the migrations after it, left for `--contract`.
    pub waiting: Vec<String>,
}

/// Serializes migrations of several runners started at once against one database.
const MIGRATION_LOCK: i64 = 0x6761_7465_686f_7573; // "gatehous"
/// How long a runner waits between tries of [`MIGRATION_LOCK`]. It tries rather than waits in
/// PostgreSQL: a concurrent index build waits for every transaction that started before it,
/// and a statement waiting for the lock would be one (online.rs).
const LOCK_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("taking the migration lock: {0}")]
    Lock(#[source] tokio_postgres::Error),
    #[error("updating the checksums of migrations changed since they shipped: {0}")]
    Superseded(#[source] tokio_postgres::Error),
    #[error("applying migrations: {0}")]
    Apply(#[source] refinery::Error),
    #[error("migration V{version} applied to this database differs from this release's: refusing to go on")]
    Divergent { version: i64 },
    #[error("migration V{version} applied to this database is unknown to this release: refusing to go on")]
    Missing { version: i64 },
    #[error("reading which migrations were applied: {0}")]
    History(#[source] tokio_postgres::Error),
    #[error("rehearsing {name} on the scratch database: {source}")]
    Rehearsal { name: String, source: tokio_postgres::Error },
    #[error("adding a column to {table} ahead of its migration: {source}")]
    ColumnAhead { table: String, source: tokio_postgres::Error },
    #[error("building index {index} ahead of its migration: {source}")]
    IndexAhead { index: String, source: tokio_postgres::Error },
    #[error("reading {}: {source}", path.display())]
    Read { path: std::path::PathBuf, source: std::io::Error },
    #[error("preparing the tool's schema: {0}")]
    Schema(#[source] tokio_postgres::Error),
    #[error("component id {0:?} cannot name a schema")]
    ToolName(String),
}

/// Applies every migration not yet applied, each in its own transaction, up to migration
/// `version` when one is given (an upgrade in stages, for example the partitioning's checks V22
/// and V23 by day and its swap V24 later) and up to the first contract step unless `contract`
/// lets it through (docs/deploying.md, "Upgrading"). Several runners may start at once against
/// one database: an advisory lock lets one migrate while the others wait. What each migration
/// adds without blocking the running release, it adds first (online.rs).
pub async fn apply_up_to(
    client: &mut tokio_postgres::Client,
    version: Option<i32>,
    contract: ContractSteps,
) -> Result<Applied, MigrationError> {
    take_lock(client).await?;
    let applied = apply_locked(client, version, contract).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrationError::Lock)?;
    applied
}

async fn take_lock(client: &tokio_postgres::Client) -> Result<(), MigrationError> {
    loop {
        let taken = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(MigrationError::Lock)?;
        if taken.get::<_, bool>(0) {
            return Ok(());
        }
        tokio::time::sleep(LOCK_RETRY).await;
    }
}

/// One migration at a time, each after what it adds ahead.
async fn apply_locked(
    client: &mut tokio_postgres::Client,
    version: Option<i32>,
    contract: ContractSteps,
) -> Result<Applied, MigrationError> {
    let runner = embedded::migrations::runner();
    let pending = pending(client, runner.get_migrations(), version, contract).await?;
    if pending.last_applied.is_some() {
        accept_superseded(client, runner.get_migrations()).await.map_err(MigrationError::Superseded)?;
    }
    let mut outcome =
        Applied { waiting: pending.waiting.iter().map(|m| m.to_string()).collect(), ..Applied::default() };
    for migration in pending.to_apply {
        online::add_ahead(client, migration.sql().unwrap_or_default()).await?;
        let run = async |client: &mut tokio_postgres::Client| {
            embedded::migrations::runner()
                .set_target(refinery::Target::Version(migration.version()))
                .set_grouped(false)
                .run_async(client)
                .await
        };
        let report =
            online::giving_way(client, run).await.map_err(MigrationError::Lock)?.map_err(MigrationError::Apply)?;
        outcome.applied.extend(report.applied_migrations().iter().map(|m| m.to_string()));
    }
    Ok(outcome)
}

/// What a database has not applied yet, in order.
pub(crate) struct Pending<'a> {
    /// The highest version it applied, if any.
    pub(crate) last_applied: Option<i64>,
    /// What `apply` would apply.
    pub(crate) to_apply: Vec<&'a refinery::Migration>,
    /// The contract step it would stop before, and what comes after it.
    pub(crate) waiting: Vec<&'a refinery::Migration>,
}

/// The migrations of `known` the database has not applied, up to `version`, split where the
/// contract steps begin unless `contract` lets them run (or the database has none applied);
/// after checking the history it holds is this release's.
pub(crate) async fn pending<'a>(
    client: &mut tokio_postgres::Client,
    known: &'a [refinery::Migration],
    version: Option<i32>,
    contract: ContractSteps,
) -> Result<Pending<'a>, MigrationError> {
    let history = client
        .query_one("SELECT to_regclass('refinery_schema_history') IS NOT NULL", &[])
        .await
        .map_err(MigrationError::History)?;
    let done = if history.get::<_, bool>(0) {
        embedded::migrations::runner().get_applied_migrations_async(client).await.map_err(MigrationError::Apply)?
    } else {
        Vec::new()
    };
    check_applied(known, &done)?;
    let mut to_apply: Vec<&refinery::Migration> = known
        .iter()
        .filter(|m| version.is_none_or(|v| i64::from(m.version()) <= i64::from(v)))
        .filter(|m| !done.iter().any(|d| d.version() == m.version()))
        .collect();
    to_apply.sort_by_key(|m| m.version());
    let contract_now = contract == ContractSteps::Apply || done.is_empty();
    let waiting = match to_apply.iter().position(|m| !contract_now && m.name().starts_with(CONTRACT_PREFIX)) {
        Some(at) => to_apply.split_off(at),
        None => Vec::new(),
    };
    let last_applied = done.iter().map(|m| i64::from(m.version())).max();
    Ok(Pending { last_applied, to_apply, waiting })
}

/// Refuses a database that applied a migration this release does not have, or one whose
/// checksum differs from this release's file. Refinery checks this only when it has something
/// to apply; an up-to-date database is checked here as well, so `migrate` never answers "up to
/// date" for a schema it does not know.
fn check_applied(known: &[refinery::Migration], applied: &[refinery::Migration]) -> Result<(), MigrationError> {
    for done in applied {
        let version = i64::from(done.version());
        let superseded = SUPERSEDED.iter().any(|&(v, old)| i64::from(v) == version && old == done.checksum());
        match known.iter().find(|m| m.version() == done.version()) {
            None => return Err(MigrationError::Missing { version }),
            Some(file) if file.checksum() != done.checksum() && !superseded => {
                return Err(MigrationError::Divergent { version });
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Records the current checksum of each [`SUPERSEDED`] migration a database applied under its
/// old one, so that refinery, which knows only the files, accepts it ([`check_applied`] already
/// has). Conditional on the old checksum; only for a database with a history.
async fn accept_superseded(
    client: &tokio_postgres::Client,
    migrations: &[refinery::Migration],
) -> Result<(), tokio_postgres::Error> {
    for &(version, applied) in SUPERSEDED {
        let Some(migration) = migrations.iter().find(|m| i64::from(m.version()) == i64::from(version)) else {
            continue;
        };
        client
            .execute(
                "UPDATE refinery_schema_history SET checksum = $1 WHERE version = $2 AND checksum = $3",
                &[&migration.checksum().to_string(), &version, &applied.to_string()],
            )
            .await?;
    }
    Ok(())
}
