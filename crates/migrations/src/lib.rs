//! The database schema: every file of the workspace's `migrations/` folder, embedded when this
//! crate compiles, applied in order by [`apply`]. The CLI's `gatehouse migrate` and `up` use it.
//! docs/architecture.md describes the data model the migrations build.

mod embedded {
    refinery::embed_migrations!("../../migrations");
}

/// Serializes migrations of several runners started at once against one database.
const MIGRATION_LOCK: i64 = 0x6761_7465_686f_7573; // "gatehous"

#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    #[error("taking the migration lock: {0}")]
    Lock(#[source] tokio_postgres::Error),
    #[error("applying migrations: {0}")]
    Apply(#[source] refinery::Error),
}

/// Applies every migration not yet applied, each in its own transaction, and names the ones
/// it applied. Several runners may start at once against one database: an advisory lock lets
/// one migrate while the others wait.
pub async fn apply(client: &mut tokio_postgres::Client) -> Result<Vec<String>, MigrationError> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrationError::Lock)?;
    let report = embedded::migrations::runner().set_grouped(false).run_async(client).await;
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrationError::Lock)?;
    let report = report.map_err(MigrationError::Apply)?;
    Ok(report.applied_migrations().iter().map(|m| m.to_string()).collect())
}
