//! The database the application runs on: `DATABASE_URL`, or an embedded PostgreSQL with
//! pgvector kept in the project's state folder. Also the schema migrations.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gatehouse_embedded_pg::{EmbeddedPostgres, PgInstall};
use gatehouse_migrations::{Applied, ContractSteps};
use gatehouse_pg_connect::PgTarget;

/// A database to serve from; an embedded server stops when this is dropped or `stop`ped.
pub(crate) struct Database {
    pub(crate) url: String,
    embedded: Option<EmbeddedPostgres>,
}

impl Database {
    /// Uses `DATABASE_URL` (or `SPIN_VARIABLE_DB_URL`, as under `spin up`) when set; otherwise
    /// starts the embedded server.
    pub(crate) async fn open(project_root: &Path, state_dir: &Path) -> Result<Database> {
        let configured = std::env::var("DATABASE_URL")
            .ok()
            .or_else(|| std::env::var("SPIN_VARIABLE_DB_URL").ok())
            .filter(|url| !url.is_empty());
        if let Some(url) = configured {
            return Ok(Database { url, embedded: None });
        }
        // initdb and pg_ctl block for up to a few seconds: keep them off the async workers.
        let install = PgInstall::locate(&project_home(project_root))?;
        let data_dir = state_dir.join("pgdata");
        let server = tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&install, &data_dir))
            .await
            .context("embedded PostgreSQL start-up task")?
            .context("starting the embedded PostgreSQL")?;
        Ok(Database { url: server.url(), embedded: Some(server) })
    }

    pub(crate) fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// `host:port` of the server, which the manifest's `allowed_outbound_hosts` must admit.
    pub(crate) fn host_port(&self) -> Result<String> {
        let target = PgTarget::parse(&self.url).context("DATABASE_URL")?;
        target.host_port().context("DATABASE_URL must name a TCP host (components connect over TCP)")
    }

    pub(crate) fn stop(mut self) -> Result<()> {
        if let Some(server) = self.embedded.take() {
            server.stop()?;
        }
        Ok(())
    }
}

/// The folder whose `.gatehouse/` holds the virtualenv that `scripts/setup` made: `dir` (the
/// manifest's folder) or the nearest folder above it that has one, so a manifest kept in a
/// subfolder (tests/fixtures/lifecycle.toml) uses the project's PostgreSQL and state. Falls
/// back to `dir` itself.
pub(crate) fn project_home(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|folder| folder.join(".gatehouse/venv").is_dir())
        .map_or_else(|| dir.to_path_buf(), Path::to_path_buf)
}

/// Starts the embedded server and leaves it running after this process exits.
pub(crate) fn start_detached(project_root: &Path, state_dir: &Path) -> Result<String> {
    let install = PgInstall::locate(&project_home(project_root))?;
    let server = EmbeddedPostgres::start(&install, &state_dir.join("pgdata"))?;
    let url = server.url();
    server.detach();
    Ok(url)
}

/// Stops the embedded server of this state folder, if one is running.
pub(crate) fn stop_embedded(project_root: &Path, state_dir: &Path) -> Result<()> {
    let data = state_dir.join("pgdata");
    if !data.join("postmaster.pid").exists() {
        return Ok(());
    }
    let install = PgInstall::locate(&project_home(project_root))?;
    EmbeddedPostgres::start(&install, &data)?.stop()?;
    Ok(())
}

/// What [`migrate_up_to`] would do to the core's schema, rehearsed on a scratch database made
/// beside the one at `url` and dropped after (`gatehouse migrate --plan`); `url`'s is only read.
pub(crate) async fn plan(url: &str, up_to: Option<i32>, contract: ContractSteps) -> Result<gatehouse_migrations::Plan> {
    let target = PgTarget::parse(url)?;
    let (mut live, live_driver) = target.connect().await.context("connecting to the database to plan")?;
    let scratch_name = format!("gatehouse_plan_{}_{}", std::process::id(), chrono::Utc::now().timestamp_millis());
    live.batch_execute(&format!("CREATE DATABASE {scratch_name}"))
        .await
        .context("creating a scratch database to rehearse the migrations on (the user needs CREATEDB)")?;
    let planned = async {
        let (mut scratch, scratch_driver) =
            target.with_database(&scratch_name).connect().await.context("connecting to the scratch database")?;
        let planned = gatehouse_migrations::plan(&mut live, &mut scratch, up_to, contract).await;
        drop(scratch);
        let _ = scratch_driver.await;
        anyhow::Ok(planned?)
    }
    .await;
    let dropped = live.batch_execute(&format!("DROP DATABASE {scratch_name} WITH (FORCE)")).await;
    drop(live);
    let _ = live_driver.await;
    let plan = planned?;
    dropped.with_context(|| format!("dropping the scratch database {scratch_name}"))?;
    Ok(plan)
}

/// Applies every migration not yet applied (see `gatehouse-migrations`): the core's, then
/// with a manifest, each tool's own that it names, in the tool's schema. Contract steps run only
/// on a new database; elsewhere they wait for `gatehouse migrate --contract`.
pub(crate) async fn migrate(url: &str, manifest_path: Option<&Path>) -> Result<Applied> {
    migrate_up_to(url, manifest_path, None, ContractSteps::WhenNew).await
}

/// [`migrate`], or with `up_to` only the core's migrations up to that version.
pub(crate) async fn migrate_up_to(
    url: &str,
    manifest_path: Option<&Path>,
    up_to: Option<i32>,
    contract: ContractSteps,
) -> Result<Applied> {
    let tools = match manifest_path.filter(|_| up_to.is_none()) {
        Some(path) => {
            let manifest = gatehouse_spin_host::manifest::Manifest::load(path)?;
            manifest.tool_migrations(path.parent().unwrap_or(Path::new("")))
        }
        None => Vec::new(),
    };
    let (mut client, driver) =
        gatehouse_pg_connect::connect(url).await.context("connecting to the database to migrate")?;
    let mut outcome = gatehouse_migrations::apply_up_to(&mut client, up_to, contract).await?;
    for (component, dir) in tools {
        let tool = gatehouse_migrations::ToolMigrations { component, dir };
        let done = gatehouse_migrations::apply_tool(&mut client, &tool)
            .await
            .with_context(|| format!("the migrations of component '{}' ({})", tool.component, tool.dir.display()))?;
        outcome.applied.extend(done);
    }
    drop(client);
    let _ = driver.await;
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_project_home_is_the_nearest_folder_with_a_virtualenv() {
        let root = std::env::temp_dir().join(format!("gatehouse-home-{}", std::process::id()));
        let fixtures = root.join("tests/fixtures");
        std::fs::create_dir_all(&fixtures).unwrap();
        // No virtualenv anywhere: the manifest's own folder.
        assert_eq!(project_home(&fixtures), fixtures);
        std::fs::create_dir_all(root.join(".gatehouse/venv")).unwrap();
        assert_eq!(project_home(&fixtures), root);
        assert_eq!(project_home(&root), root);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
