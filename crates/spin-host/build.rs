//! Generates the wasmtime host bindings for the Spin interfaces in `wit/host.wit`.
//!
//! The Spin WIT packages are not vendored: they are read from the spin-sdk crate that the
//! components already depend on, so the host and the guests bind the very same files. The
//! `bindgen!` macro needs a literal path, so this script drives the same generator directly.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use wasmtime_internal_wit_bindgen::{FunctionConfig, FunctionFilter, FunctionFlags, Opts};
use wit_parser::Resolve;

fn main() -> Result<()> {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let workspace = manifest_dir.join("../..");
    let host_wit = workspace.join("wit/host.wit");
    println!("cargo:rerun-if-changed={}", host_wit.display());
    println!("cargo:rerun-if-changed={}", workspace.join("Cargo.lock").display());

    let sdk_wit = spin_sdk_wit_dir(&workspace)?;
    let mut resolve = Resolve::default();
    resolve.push_dir(&sdk_wit).with_context(|| format!("parsing spin-sdk WIT at {}", sdk_wit.display()))?;
    let package = resolve.push_file(&host_wit)?;
    let world = resolve.select_world(&[package], Some("spin-host"))?;

    let mut imports = FunctionConfig::new();
    imports.push(FunctionFilter::Default, FunctionFlags::ASYNC);
    let mut opts = Opts { imports, anyhow: true, ..Opts::default() };
    // The guest's `connection` handle is backed by a pooled client held in the resource table.
    opts.with.insert("spin:postgres/postgres.connection".into(), "crate::host::PgConnection".into());
    let code = opts.generate(&mut resolve, world)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("spin_host.rs");
    std::fs::write(&out, code)?;
    Ok(())
}

/// Finds the `wit/` folder of the spin-sdk package that Cargo.lock pins for the components.
fn spin_sdk_wit_dir(workspace: &Path) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--manifest-path"])
        .arg(workspace.join("Cargo.toml"))
        .output()
        .context("running cargo metadata")?;
    if !output.status.success() {
        bail!("cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
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
