//! Generates the wasmtime host bindings for the Spin interfaces in `wit/host.wit`, and tells the
//! sources which wasmtime release they are built on.
//!
//! The Spin WIT packages are not vendored: they are read from the spin-sdk crate that the
//! components already depend on, so the host and the guests bind the very same files. The
//! `bindgen!` macro needs a literal path, so this script drives the same generator directly.
//!
//! The same sources build the runner's host and the hosts pinned to older wasmtime releases
//! (`crates/pinned-hosts`); each package depends on its own wasmtime, and this script sets
//! `cfg(wasmtime_major = "N")` from the one Cargo resolved for it, so the sources pick their
//! `wasi:http` glue by what they are really linked against.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use wasmtime_internal_wit_bindgen::{FunctionConfig, FunctionFilter, FunctionFlags, Opts};
use wit_parser::Resolve;

fn main() -> Result<()> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let workspace = workspace_root(&manifest_dir)?;
    let host_wit = workspace.join("wit/host.wit");
    println!("cargo:rerun-if-changed={}", host_wit.display());
    println!("cargo:rerun-if-changed={}", workspace.join("Cargo.lock").display());

    let metadata = cargo_metadata(&workspace)?;
    let version = wasmtime_version(&metadata, &manifest_dir)?;
    let major = version.split('.').next().unwrap_or_default();
    println!("cargo::rustc-check-cfg=cfg(wasmtime_major, values(\"42\", \"44\", \"48\"))");
    println!("cargo::rustc-cfg=wasmtime_major=\"{major}\"");
    // `/.well-known/spin/info` names it, so a test can tell which host answered.
    println!("cargo::rustc-env=GATEHOUSE_WASMTIME_VERSION={version}");

    let sdk_wit = spin_sdk_wit_dir(&metadata)?;
    let mut resolve = Resolve::default();
    resolve.push_dir(&sdk_wit).with_context(|| format!("parsing spin-sdk WIT at {}", sdk_wit.display()))?;
    let package = resolve.push_file(&host_wit)?;
    let world = resolve.select_world(&[package], Some("spin-host"))?;

    let mut imports = FunctionConfig::new();
    imports.push(FunctionFilter::Default, FunctionFlags::ASYNC);
    let mut opts = Opts { imports, anyhow: true, ..Opts::default() };
    // The guest's `connection` handle is backed by a pooled client held in the resource table.
    opts.with.insert("spin:postgres/postgres.connection".into(), "crate::host::PgConnection".into());
    // wasmtime 48's generator takes the resolve mutably; 42's and 44's read it.
    #[allow(clippy::unnecessary_mut_passed)]
    let code = opts.generate(&mut resolve, world)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("spin_host.rs");
    std::fs::write(&out, code)?;
    Ok(())
}

/// The nearest folder at or above `dir` whose Cargo.toml declares the workspace.
fn workspace_root(dir: &Path) -> Result<PathBuf> {
    for candidate in dir.ancestors() {
        let manifest = candidate.join("Cargo.toml");
        if std::fs::read_to_string(&manifest).is_ok_and(|text| text.lines().any(|line| line.trim() == "[workspace]")) {
            return Ok(candidate.to_path_buf());
        }
    }
    bail!("no workspace above {}", dir.display())
}

fn cargo_metadata(workspace: &Path) -> Result<serde_json::Value> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// The version of the `wasmtime` that Cargo resolved for the package being built.
fn wasmtime_version(metadata: &serde_json::Value, manifest_dir: &Path) -> Result<String> {
    let manifest = manifest_dir.join("Cargo.toml").canonicalize()?;
    let packages = metadata["packages"].as_array().context("no packages in metadata")?;
    let this = packages
        .iter()
        .find(|p| {
            p["manifest_path"].as_str().and_then(|m| Path::new(m).canonicalize().ok()).as_ref() == Some(&manifest)
        })
        .context("this package is not in the workspace's metadata")?;
    let nodes = metadata["resolve"]["nodes"].as_array().context("no resolve graph in metadata")?;
    let node = nodes.iter().find(|n| n["id"] == this["id"]).context("this package is not in the resolve graph")?;
    let deps = node["deps"].as_array().context("no dependencies in the resolve graph")?;
    let wasmtime = deps.iter().find(|d| d["name"] == "wasmtime").context("this package does not depend on wasmtime")?;
    let id = wasmtime["pkg"].as_str().context("no package id")?;
    let package = packages.iter().find(|p| p["id"] == id).context("wasmtime is not in the metadata's packages")?;
    Ok(package["version"].as_str().context("wasmtime has no version")?.to_owned())
}

/// Finds the `wit/` folder of the spin-sdk package that Cargo.lock pins for the components.
fn spin_sdk_wit_dir(metadata: &serde_json::Value) -> Result<PathBuf> {
    let packages = metadata["packages"].as_array().context("no packages in metadata")?;
    for package in packages {
        if package["name"] == "spin-sdk" {
            let manifest = package["manifest_path"].as_str().context("no manifest path")?;
            let dir = Path::new(manifest).parent().context("manifest has no parent")?;
            return Ok(dir.join("wit"));
        }
    }
    bail!("spin-sdk is not in the workspace's dependency graph")
}
