//! What goes wrong: a URL that cannot be used, and a connection that failed. Neither ever
//! quotes the URL, which may hold a password; they name the host, port and database at most.
use std::fmt;
use std::path::PathBuf;

use crate::mode::SslMode;

/// Why a database URL cannot be used. Never quotes the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum PgUrlError {
    /// `sslmode` is not one of libpq's.
    #[error("sslmode '{0}' is not one of disable, allow, prefer, require, verify-ca, verify-full")]
    SslMode(String),
    /// `sslrootcert=system` with a mode weaker than `verify-full`, which libpq refuses too.
    #[error("sslrootcert=system requires sslmode=verify-full (as in libpq), not sslmode={0}")]
    SystemRootsNeedVerifyFull(SslMode),
    /// The `sslrootcert` file cannot be read, or holds no usable CA certificate.
    #[error("sslrootcert {path}: {reason}")]
    RootCert {
        /// The file, as the URL names it.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// tokio-postgres cannot read the rest of the URL.
    #[error("not a valid PostgreSQL URL: {0}")]
    Invalid(String),
    /// rustls refused the configuration.
    #[error("setting up TLS: {0}")]
    Tls(String),
}

/// A failed connection: where to, with which `sslmode`, and why.
#[derive(Debug)]
pub struct PgConnectError {
    /// `host:port/dbname`, never the user or password.
    pub(crate) target: String,
    pub(crate) mode: SslMode,
    /// What the failure most likely means, and what to change, when it is recognised.
    pub(crate) explanation: Option<String>,
    pub(crate) source: tokio_postgres::Error,
}

impl PgConnectError {
    /// The message and its causes on one line, for where only a string travels (a guest's
    /// `spin:postgres` error).
    pub fn full_message(&self) -> String {
        format!("{self}: {}", error_text(&self.source))
    }
}

impl fmt::Display for PgConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot connect to {} (sslmode={})", self.target, self.mode)?;
        if let Some(explanation) = &self.explanation {
            write!(f, ": {explanation}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PgConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// An error and its sources, `: `-separated; a source whose text the message already ends with
/// is not repeated.
pub(crate) fn error_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        source: Option<Box<Layer>>,
    }

    fn chain(texts: &[&'static str]) -> Layer {
        texts.iter().rev().fold(None, |source, &text| Some(Layer { text, source: source.map(Box::new) })).unwrap()
    }

    #[test]
    fn an_error_text_joins_its_causes_once_each() {
        assert_eq!(error_text(&chain(&["connecting", "io error", "refused"])), "connecting: io error: refused");
        // A message that already quotes its cause, as tokio-postgres's do, does not say it twice.
        assert_eq!(error_text(&chain(&["db error: refused", "refused"])), "db error: refused");
    }
}
