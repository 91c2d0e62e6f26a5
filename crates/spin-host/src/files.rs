//! A component's `files`: the host files it may read, as Spin mounts them.
//!
//! A pattern (`"tools/book_table.toml"`, `"assets/*.json"`) makes each matching file readable at
//! the same path under `/`; a mapping (`{ source = "static", destination = "/web" }`) makes a
//! folder readable at `destination`. Like `spin up`, the runner copies the matched files into a
//! folder of their own for the guest, so nothing beside them is reachable; both are read-only.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::manifest::{ComponentDecl, FileMount};

/// A host folder and where the guest sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Mount {
    pub host: PathBuf,
    pub guest: String,
}

/// The folders to preopen for `decl`, staging pattern matches under `staging` (a folder the
/// caller keeps for as long as the application runs).
pub(crate) fn mounts(decl: &ComponentDecl, manifest_dir: &Path, staging: &Path) -> Result<Vec<Mount>> {
    let root = decl.files_root.as_deref().unwrap_or(manifest_dir);
    let mut mounts = Vec::new();
    let mut staged_any = false;
    for mount in &decl.files {
        match mount {
            FileMount::Pattern(pattern) => {
                if Path::new(pattern).is_absolute() || pattern.split(['/', '\\']).any(|part| part == "..") {
                    bail!("files: {pattern:?} must be a path inside the application's folder");
                }
                let full = root.join(pattern);
                let matches = glob::glob(&full.to_string_lossy()).with_context(|| format!("files: {pattern:?}"))?;
                let mut found = 0;
                for entry in matches {
                    let file = entry.with_context(|| format!("files: {pattern:?}"))?;
                    if !file.is_file() {
                        continue;
                    }
                    let relative = file.strip_prefix(root).with_context(|| format!("files: {pattern:?}"))?;
                    let target = staging.join(relative);
                    if let Some(parent) = target.parent() {
                        std::fs::create_dir_all(parent)?;
                    }
                    std::fs::copy(&file, &target).with_context(|| format!("copying {}", file.display()))?;
                    found += 1;
                }
                if found == 0 {
                    bail!("files: {pattern:?} matches no file under {}", root.display());
                }
                staged_any = true;
            }
            FileMount::Directory { source, destination } => {
                let host = root.join(source);
                if !host.is_dir() {
                    bail!("files: {} is not a folder", host.display());
                }
                if !destination.starts_with('/') {
                    bail!("files: the destination {destination:?} must be an absolute guest path");
                }
                mounts.push(Mount { host, guest: destination.clone() });
            }
        }
    }
    if staged_any {
        mounts.insert(0, Mount { host: staging.to_path_buf(), guest: "/".to_owned() });
    }
    Ok(mounts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(files: Vec<FileMount>) -> ComponentDecl {
        let mut decl: ComponentDecl = toml::from_str("source = \"a.wasm\"").unwrap_or_else(|e| panic!("{e}"));
        decl.files = files;
        decl
    }

    #[test]
    fn patterns_are_staged_alone_and_folders_mounted_where_they_are_asked() {
        let app = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let staging = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(app.path().join("tools")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(app.path().join("tools/a.toml"), "a").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(app.path().join("tools/secret.env"), "s").unwrap_or_else(|e| panic!("{e}"));

        let found = mounts(&decl(vec![FileMount::Pattern("tools/*.toml".into())]), app.path(), staging.path())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found, vec![Mount { host: staging.path().to_path_buf(), guest: "/".into() }]);
        assert!(staging.path().join("tools/a.toml").is_file());
        assert!(!staging.path().join("tools/secret.env").exists(), "only the matching files are reachable");

        let folder = FileMount::Directory { source: "tools".into(), destination: "/t".into() };
        let found = mounts(&decl(vec![folder]), app.path(), staging.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(found, vec![Mount { host: app.path().join("tools"), guest: "/t".into() }]);

        for bad in ["../x", "/etc/passwd", "tools/none.toml"] {
            assert!(mounts(&decl(vec![FileMount::Pattern(bad.into())]), app.path(), staging.path()).is_err(), "{bad}");
        }
    }
}
