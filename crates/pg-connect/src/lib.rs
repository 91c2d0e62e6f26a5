//! The one place that turns a database URL into PostgreSQL connections, with TLS as libpq's
//! `sslmode` and `sslrootcert` say. The CLI's own connections (`migrate`, `up`, `ingest`),
//! `bench`, and the guests' pooled connections (the Spin host's `spin:postgres`) all connect
//! through [`PgTarget`] (docs/deploying.md, "A managed PostgreSQL, over TLS").
//!
//! TLS is rustls (no system OpenSSL), with the web PKI roots built in (`webpki-roots`, so the
//! machine's certificate store plays no part). The modes, as libpq defines them:
//!
//! - `disable`: no TLS.
//! - `allow`, `prefer` (the default): TLS when the server offers it, plain otherwise; the
//!   certificate is not checked, unless `sslrootcert` names a file (then as `verify-ca`).
//! - `require`: TLS or no connection; the certificate is not checked, unless `sslrootcert`
//!   names a file (then as `verify-ca`).
//! - `verify-ca`: TLS; the certificate must chain to a trusted CA (the host name is not checked).
//! - `verify-full`: TLS; the certificate must chain to a trusted CA and name the host.
//!
//! `sslrootcert=<file>` holds the trusted CA certificates (PEM); without it the verifying modes
//! trust the built-in web PKI roots. `sslrootcert=system` trusts those roots too, and as in
//! libpq makes `verify-full` the default and any weaker mode an error. libpq's `allow` tries a
//! plain connection first; here it is `prefer`, which tries TLS first (both accept either).
//! The other parameters of the URL are tokio-postgres's.
//!
//! Nothing here prints the URL: errors name the host, port and database at most.
//!
//! Modules, each importing only those above it: `mode` (the policy), `error`, then `url`
//! (reading a URL), `tls` (rustls) and `explain` (a failure in words); this file puts them
//! together.
#![warn(unreachable_pub, missing_docs)]

mod error;
mod explain;
mod mode;
mod tls;
mod url;

use std::fmt;
use std::time::Duration;

use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

pub use error::{PgConnectError, PgUrlError};
pub use mode::SslMode;

use explain::Attempt;
use mode::RootCerts;

/// A client and the task that drives its connection; the task ends when the client is dropped.
pub type Connection = (tokio_postgres::Client, tokio::task::JoinHandle<()>);

/// Why [`connect`] failed: the URL, or the connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The URL cannot be used.
    #[error(transparent)]
    Url(#[from] PgUrlError),
    /// The database could not be reached, or refused the connection.
    #[error(transparent)]
    Connect(#[from] PgConnectError),
}

/// Connects to the database at `url`; the connection is driven on a task of its own.
pub async fn connect(url: &str) -> Result<Connection, ConnectError> {
    let target = PgTarget::parse(url)?;
    Ok(target.connect().await?)
}

/// A database to connect to: the URL's connection settings and its TLS policy.
#[derive(Clone)]
pub struct PgTarget {
    config: tokio_postgres::Config,
    mode: SslMode,
    roots: RootCerts,
    tls: MakeRustlsConnect,
}

impl fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio-postgres's Debug of the config redacts the password.
        f.debug_struct("PgTarget").field("config", &self.config).field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl PgTarget {
    /// Reads a `postgres://` URL (or a libpq `key=value` string) with its `sslmode` and
    /// `sslrootcert`; reads the `sslrootcert` file when TLS may be used.
    pub fn parse(url: &str) -> Result<PgTarget, PgUrlError> {
        let url::ParsedUrl { config, mode, roots } = url::parse(url)?;
        let tls = MakeRustlsConnect::new(tls::client_config(mode, &roots)?);
        Ok(PgTarget { config, mode, roots, tls })
    }

    /// The connection settings, without the TLS parameters (tokio-postgres's own), for a pool
    /// to connect with beside [`PgTarget::tls`].
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// Gives up on a connection attempt after `timeout`. Only this setting can be changed: the
    /// TLS negotiation stays the one the URL's `sslmode` asked for.
    pub fn set_connect_timeout(&mut self, timeout: Duration) {
        self.config.connect_timeout(timeout);
    }

    /// The same server, settings and TLS, with another database.
    pub fn with_database(&self, name: &str) -> PgTarget {
        let mut other = self.clone();
        other.config.dbname(name);
        other
    }

    /// The TLS connector, for a pool (deadpool-postgres) to connect with.
    pub fn tls(&self) -> MakeRustlsConnect {
        self.tls.clone()
    }

    /// The first TCP host and its port, as `host:port` (IPv6 in brackets).
    pub fn host_port(&self) -> Option<String> {
        let host = match self.config.get_hosts().first() {
            Some(Host::Tcp(host)) => host.clone(),
            _ => return None,
        };
        let port = self.config.get_ports().first().copied().unwrap_or(5432);
        Some(if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") })
    }

    /// Connects, and drives the connection on a task of the current runtime; the task ends
    /// when the client is dropped.
    pub async fn connect(&self) -> Result<Connection, PgConnectError> {
        let (client, connection) = self.config.connect(self.tls.clone()).await.map_err(|e| self.connect_error(e))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, driver))
    }

    /// Explains a failure to connect to this target, such as a pool's.
    pub fn connect_error(&self, source: tokio_postgres::Error) -> PgConnectError {
        let attempt = Attempt { config: &self.config, mode: self.mode, roots: &self.roots };
        let explanation = explain::explain(&attempt, &source);
        PgConnectError { target: self.describe(), mode: self.mode, explanation, source }
    }

    /// `host:port/dbname`, for messages: never the user or password.
    fn describe(&self) -> String {
        let ports = self.config.get_ports();
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let port = ports.get(i).or_else(|| ports.first()).copied().unwrap_or(5432);
                match host {
                    Host::Tcp(host) if host.contains(':') => format!("[{host}]:{port}"),
                    Host::Tcp(host) => format!("{host}:{port}"),
                    #[cfg(unix)]
                    Host::Unix(path) => format!("{}:{port}", path.display()),
                }
            })
            .collect();
        let hosts = if hosts.is_empty() {
            self.config.get_hostaddrs().iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
        } else {
            hosts.join(",")
        };
        match self.config.get_dbname() {
            Some(db) => format!("{hosts}/{db}"),
            None => hosts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_map_to_what_tokio_postgres_negotiates() {
        use tokio_postgres::config::SslMode as Pg;
        for (mode, negotiation) in [
            ("disable", Pg::Disable),
            ("allow", Pg::Prefer),
            ("prefer", Pg::Prefer),
            ("require", Pg::Require),
            ("verify-ca", Pg::Require),
            ("verify-full", Pg::Require),
        ] {
            let target = PgTarget::parse(&format!("postgres://u:secret@h:6432/db?sslmode={mode}")).expect("parses");
            assert_eq!(target.mode.as_str(), mode);
            assert_eq!(target.config().get_ssl_mode(), negotiation, "{mode}");
            assert_eq!(target.roots, RootCerts::BuiltIn);
            assert_eq!(target.config().get_password(), Some(&b"secret"[..]));
        }
    }

    #[test]
    fn prefer_is_the_default_and_system_roots_mean_verify_full() {
        let target = PgTarget::parse("postgres://h/db").expect("parses");
        assert_eq!(target.mode, SslMode::Prefer);
        let target = PgTarget::parse("postgres://h/db?sslrootcert=system").expect("parses");
        assert_eq!(target.mode, SslMode::VerifyFull);
        assert_eq!(target.roots, RootCerts::BuiltIn);
        let refused = PgTarget::parse("postgres://h/db?sslrootcert=system&sslmode=require").unwrap_err();
        assert_eq!(
            refused.to_string(),
            "sslrootcert=system requires sslmode=verify-full (as in libpq), not sslmode=require"
        );
    }

    #[test]
    fn an_unknown_mode_is_refused_without_quoting_the_url() {
        let error = PgTarget::parse("postgres://u:hunter2@h/db?sslmode=verify").unwrap_err().to_string();
        assert_eq!(error, "sslmode 'verify' is not one of disable, allow, prefer, require, verify-ca, verify-full");
        let error = PgTarget::parse("postgres://u:hunter2@h/db?sslmode=require&bogus=1").unwrap_err().to_string();
        assert!(error.contains("bogus") && !error.contains("hunter2"), "{error}");
    }

    #[test]
    fn a_root_certificate_file_is_read_only_when_tls_may_be_used() {
        let missing = "/nonexistent/gatehouse-ca.pem";
        let target =
            PgTarget::parse(&format!("postgres://h/db?sslmode=disable&sslrootcert={missing}")).expect("parses");
        assert_eq!(target.roots, RootCerts::File(missing.into()));
        let error = PgTarget::parse(&format!("postgres://h/db?sslmode=verify-full&sslrootcert={missing}")).unwrap_err();
        assert!(error.to_string().starts_with(&format!("sslrootcert {missing}: cannot be read")), "{error}");

        let dir = std::env::temp_dir().join(format!("gatehouse-pg-connect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let not_pem = dir.join("not-pem.txt");
        std::fs::write(&not_pem, "hello").unwrap();
        let error = PgTarget::parse(&format!("postgres://h/db?sslmode=require&sslrootcert={}", not_pem.display()))
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("holds no PEM certificate (-----BEGIN CERTIFICATE-----)"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn descriptions_name_host_port_and_database_only() {
        let target = PgTarget::parse("postgres://alice:hunter2@db.example.com:6432/app?sslmode=require").unwrap();
        assert_eq!(target.describe(), "db.example.com:6432/app");
        assert_eq!(target.host_port().as_deref(), Some("db.example.com:6432"));
        let target = PgTarget::parse("postgres://[::1]/app").unwrap();
        assert_eq!(target.describe(), "[::1]:5432/app");
        assert_eq!(target.host_port().as_deref(), Some("[::1]:5432"));
        assert!(!format!("{target:?}").contains("hunter2"));
    }

    #[test]
    fn the_connect_timeout_leaves_the_tls_negotiation_as_it_was() {
        let mut target = PgTarget::parse("postgres://h/db?sslmode=verify-full").unwrap();
        target.set_connect_timeout(Duration::from_secs(5));
        assert_eq!(target.config().get_connect_timeout(), Some(&Duration::from_secs(5)));
        assert_eq!(target.config().get_ssl_mode(), tokio_postgres::config::SslMode::Require);
    }
}
