use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every message says what went wrong and what to do about it; none carries a secret
/// (the server uses trust authentication on loopback, so there is no password to leak).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "PostgreSQL binaries not found (looked for {looked_for}). Run scripts/setup to install \
         them, or set GATEHOUSE_PG_INSTALL to a pgserver `pginstall` directory"
    )]
    InstallNotFound { looked_for: String },

    #[error(
        "{path} is not a usable PostgreSQL install: {problem}. Point GATEHOUSE_PG_INSTALL at a \
         pgserver `pginstall` directory, or unset it and run scripts/setup"
    )]
    InvalidInstall { path: PathBuf, problem: String },

    #[error(
        "{path} is not empty and is not a PostgreSQL data directory; empty it or choose another \
         data directory"
    )]
    NotADataDir { path: PathBuf },

    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error("{tool} failed ({status}): {output}\n{hint}")]
    Tool { tool: String, status: String, output: String, hint: String },

    #[error(
        "PostgreSQL did not start on {data_dir}; its log ({log}) ends with:\n{tail}\nFix the \
         cause above (or, to start from scratch, remove the data directory: its data is lost)"
    )]
    StartFailed { data_dir: PathBuf, log: PathBuf, tail: String },

    #[error(
        "a PostgreSQL server is running on {data_dir} (pid {pid}) but does not answer on \
         127.0.0.1:{port}; stop it with `pg_ctl -D {data_dir} stop -m fast` and try again"
    )]
    Unreachable { data_dir: PathBuf, pid: i32, port: u16 },

    #[error(
        "PostgreSQL refuses to run as root and no unprivileged user could be found or created \
         ({detail}); create a system user named gatehouse-pg, or run as a non-root user"
    )]
    NoUnprivilegedUser { detail: String },

    #[error("no free TCP port on 127.0.0.1 ({0}); free one or check the loopback interface")]
    NoFreePort(#[source] io::Error),
}

impl Error {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }
}
