//! `gatehouse build`: each component's build command, in manifest order, stopping at the first failure.
use anyhow::{Context, Result, bail};

use super::AppArgs;
use gatehouse_spin_host::manifest::Manifest;

pub(super) async fn run(args: &AppArgs) -> Result<()> {
    let manifest_path = args.manifest_path()?;
    let manifest = Manifest::load(&manifest_path)?;
    let root = args.project_root()?;
    for (id, component) in &manifest.component {
        let Some(build) = &component.build else {
            println!("{id}: no build command, skipped");
            continue;
        };
        let workdir = build.workdir.as_ref().map(|w| root.join(w)).unwrap_or_else(|| root.clone());
        println!("Building component {id} with `{}`", build.command);
        let status = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(&build.command)
            .current_dir(&workdir)
            .status()
            .await
            .with_context(|| format!("running the build command of {id}"))?;
        if !status.success() {
            bail!("build command for component {id} failed with {status}");
        }
    }
    println!("Finished building all components");
    Ok(())
}
