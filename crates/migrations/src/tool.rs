//! A tool's own migrations (docs/tools.md, "A tool's own tables"): a tool that needs tables ships
//! `V<n>__<name>.sql` files in a folder of its own, named in its component's section of the
//! manifest (`[component.<id>.tool.gatehouse] migrations = "..."`). They are applied in the
//! tool's own schema, `tool_<component id>`, with their own history table there, so a tool's
//! numbering never meets the core's or another tool's, and adding or removing a tool touches
//! nothing else. Read when `migrate` or `up` runs: no rebuild of the CLI.

use std::path::{Path, PathBuf};

use crate::{MIGRATION_LOCK, MigrationError};

/// One tool's migrations.
#[derive(Debug, Clone)]
pub struct ToolMigrations {
    /// The component's id (`order-supplies`).
    pub component: String,
    /// The folder of `V<n>__<name>.sql` files.
    pub dir: PathBuf,
}

impl ToolMigrations {
    /// The schema the tool's tables live in: `tool_` and the component id in snake case.
    pub fn schema(&self) -> String {
        schema_of(&self.component)
    }
}

/// `tool_<component id>` with `-` as `_`. Component ids are lowercase letters, digits and
/// single dashes (as Spin requires), so this is a plain identifier.
pub fn schema_of(component: &str) -> String {
    format!("tool_{}", component.replace('-', "_"))
}

/// Applies `tool`'s migrations not yet applied, in its schema, and names the ones it applied.
pub async fn apply_tool(
    client: &mut tokio_postgres::Client,
    tool: &ToolMigrations,
) -> Result<Vec<String>, MigrationError> {
    let migrations = read(&tool.dir)?;
    let schema = tool.schema();
    if !schema.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') {
        return Err(MigrationError::ToolName(tool.component.clone()));
    }
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrationError::Lock)?;
    // Unqualified names (the tool's tables, refinery's history table) resolve to the tool's
    // schema for this session only.
    let prepared = client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}; SET search_path TO {schema}"))
        .await
        .map_err(MigrationError::Schema);
    let report = match prepared {
        Ok(()) => {
            refinery::Runner::new(&migrations).set_grouped(false).run_async(client).await.map_err(MigrationError::Apply)
        }
        Err(error) => Err(error),
    };
    let reset = client.batch_execute("RESET search_path").await.map_err(MigrationError::Schema);
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]).await.map_err(MigrationError::Lock)?;
    reset?;
    Ok(report?.applied_migrations().iter().map(|m| format!("{schema}.{m}")).collect())
}

/// The `V<n>__<name>.sql` files of `dir`, in refinery's form.
fn read(dir: &Path) -> Result<Vec<refinery::Migration>, MigrationError> {
    let unreadable = |source: std::io::Error| MigrationError::Read { path: dir.to_path_buf(), source };
    let mut migrations = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()).and_then(|n| n.strip_suffix(".sql")) else {
            continue;
        };
        let sql =
            std::fs::read_to_string(&path).map_err(|source| MigrationError::Read { path: path.clone(), source })?;
        migrations.push(refinery::Migration::unapplied(name, &sql).map_err(MigrationError::Apply)?);
    }
    Ok(migrations)
}
