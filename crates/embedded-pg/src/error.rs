use std::io;
use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every message says what went wrong and what to do about it; none carries a secret. The
/// superuser's password lives in its file and in [`EmbeddedPostgres::url`] only: it reaches
/// the tools through a private file, their standard input or their environment, never their
/// command line, and tool output quoted in an error is scrubbed of it. Messages name the
/// password file, never its content.
///
/// [`EmbeddedPostgres::url`]: crate::EmbeddedPostgres::url
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

    #[error(
        "could not get random bytes from the operating system for the database password \
         ({detail}); check that getrandom(2) or /dev/urandom works here"
    )]
    NoRandomness { detail: String },
}

impl Error {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { action, path, source }
    }
}
