//! The one place that turns a database URL into PostgreSQL connections, with TLS as libpq's
//! `sslmode` and `sslrootcert` say. `migrate`, `up`'s own connections, `ingest`, `bench` and the
//! guests' pooled connections (the `spin:postgres` host) all connect through [`PgTarget`].
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
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::Host;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, PgUrlError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => return Err(PgUrlError::SslMode(other.to_owned())),
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// What tokio-postgres does: no TLS, TLS if offered, or TLS or nothing.
    fn negotiation(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode as Pg;
        match self {
            SslMode::Disable => Pg::Disable,
            SslMode::Allow | SslMode::Prefer => Pg::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Pg::Require,
        }
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the trusted CA certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCerts {
    /// No `sslrootcert` (or `system`): the built-in web PKI roots, for the verifying modes.
    BuiltIn,
    /// `sslrootcert=<file>`.
    File(PathBuf),
}

/// Why a database URL cannot be used. Never quotes the URL (it may hold a password).
#[derive(Debug, thiserror::Error)]
pub enum PgUrlError {
    #[error("sslmode '{0}' is not one of disable, allow, prefer, require, verify-ca, verify-full")]
    SslMode(String),
    #[error("sslrootcert=system requires sslmode=verify-full (as in libpq), not sslmode={0}")]
    SystemRootsNeedVerifyFull(SslMode),
    #[error("sslrootcert {path}: {reason}")]
    RootCert { path: PathBuf, reason: String },
    #[error("not a valid PostgreSQL URL: {0}")]
    Invalid(String),
    #[error("setting up TLS: {0}")]
    Tls(String),
}

/// The TLS parameters of a URL, taken out of it, and the URL without them.
#[derive(Debug, Default, PartialEq, Eq)]
struct SslParams {
    mode: Option<String>,
    root_cert: Option<String>,
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
        let (rest, ssl) = take_ssl_params(url)?;
        let mut config: tokio_postgres::Config = rest.parse().map_err(|e| PgUrlError::Invalid(error_text(&e)))?;
        let system = ssl.root_cert.as_deref() == Some("system");
        let mode = match ssl.mode.as_deref() {
            Some(mode) => SslMode::parse(mode)?,
            None if system => SslMode::VerifyFull,
            // libpq's default.
            None => SslMode::Prefer,
        };
        if system && mode != SslMode::VerifyFull {
            return Err(PgUrlError::SystemRootsNeedVerifyFull(mode));
        }
        let roots = match ssl.root_cert {
            Some(path) if !path.is_empty() && !system => RootCerts::File(PathBuf::from(path)),
            _ => RootCerts::BuiltIn,
        };
        config.ssl_mode(mode.negotiation());
        let tls = MakeRustlsConnect::new(client_config(mode, &roots)?);
        Ok(PgTarget { config, mode, roots, tls })
    }

    #[cfg(test)]
    pub(crate) fn ssl_mode(&self) -> SslMode {
        self.mode
    }

    #[cfg(test)]
    pub(crate) fn root_certs(&self) -> &RootCerts {
        &self.roots
    }

    /// The connection settings, without the TLS parameters (tokio-postgres's own).
    pub(crate) fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    pub(crate) fn config_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.config
    }

    /// The TLS connector, for a pool (deadpool-postgres) to connect with.
    pub(crate) fn tls(&self) -> MakeRustlsConnect {
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

    /// `host:port/dbname`, for messages: never the user or password.
    pub(crate) fn describe(&self) -> String {
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

    /// Connects, and drives the connection on a task of the current runtime; the task ends
    /// when the client is dropped.
    pub(crate) async fn connect(
        &self,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), PgConnectError> {
        let (client, connection) = self.config.connect(self.tls.clone()).await.map_err(|e| self.connect_error(e))?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok((client, driver))
    }

    /// Explains a failure to connect to this target.
    pub(crate) fn connect_error(&self, source: tokio_postgres::Error) -> PgConnectError {
        let explanation = self.explain(&source);
        PgConnectError { target: self.describe(), mode: self.mode, explanation, source }
    }

    fn explain(&self, error: &tokio_postgres::Error) -> Option<String> {
        if let Some(tls) = rustls_error(error) {
            return Some(self.explain_tls(tls));
        }
        let chain = error_text(error);
        if chain.contains("server does not support TLS") {
            return Some(format!(
                "the server does not offer TLS, which sslmode={} requires (sslmode=disable or prefer connects without it)",
                self.mode
            ));
        }
        if let Some(db) = error.as_db_error() {
            let message = db.message();
            let asks_for_tls = ["SSL", "ssl", "encryption", "TLS"].iter().any(|word| message.contains(word));
            if self.mode == SslMode::Disable && asks_for_tls {
                return Some(format!(
                    "the server refused a connection without TLS ({message}): set sslmode=require, or verify-full with \
                     sslrootcert"
                ));
            }
        }
        None
    }

    fn trusted(&self) -> String {
        match &self.roots {
            RootCerts::File(path) => format!("sslrootcert {}", path.display()),
            RootCerts::BuiltIn => "the built-in web PKI roots (name the server's CA with sslrootcert=<file>)".into(),
        }
    }

    fn explain_tls(&self, error: &rustls::Error) -> String {
        let certificate = match error {
            rustls::Error::InvalidCertificate(certificate) => certificate,
            rustls::Error::AlertReceived(alert) => {
                return format!("the server ended the TLS handshake with the alert {alert:?}");
            }
            rustls::Error::NoCertificatesPresented => return "the server presented no TLS certificate".into(),
            other => return format!("the TLS handshake failed: {other}"),
        };
        let host = self.config.get_hosts().first().map(|host| match host {
            Host::Tcp(host) => host.clone(),
            #[cfg(unix)]
            Host::Unix(path) => path.display().to_string(),
        });
        match certificate {
            CertificateError::UnknownIssuer => {
                format!("the server's TLS certificate is not trusted: no CA in {} issued it", self.trusted())
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
                "the server's TLS certificate does not name the host {}; sslmode=verify-full checks the name: \
                 connect by a name the certificate lists, or use sslmode=verify-ca",
                host.as_deref().unwrap_or("connected to")
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("the server's TLS certificate has expired ({certificate})")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("the server's TLS certificate is not valid yet ({certificate})")
            }
            CertificateError::Revoked => "the server's TLS certificate has been revoked".into(),
            CertificateError::BadSignature => {
                format!("the server's TLS certificate is not trusted: its signature does not verify ({certificate})")
            }
            other => format!("the server's TLS certificate is not trusted: {other}"),
        }
    }
}

/// A failed connection: where to, with which `sslmode`, and why.
#[derive(Debug)]
pub(crate) struct PgConnectError {
    target: String,
    mode: SslMode,
    explanation: Option<String>,
    source: tokio_postgres::Error,
}

impl PgConnectError {
    /// The message and its causes on one line, for where only a string travels (the guests).
    pub(crate) fn full_message(&self) -> String {
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

/// Connects to the database at `url`; the connection is driven on a task of its own.
pub async fn connect(url: &str) -> anyhow::Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>)> {
    let target = PgTarget::parse(url)?;
    Ok(target.connect().await?)
}

/// An error and its sources, `: `-separated.
fn error_text(error: &dyn std::error::Error) -> String {
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

/// The rustls error in an error's chain. An `io::Error` wrapping one reports the wrapped error's
/// own source as its source, so the wrapped error is looked at directly.
fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(tls) = io.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        current = error.source();
    }
    None
}

// --- The URL's TLS parameters ------------------------------------------------------------------

/// Takes `sslmode` and `sslrootcert` out of a URL's query (or a `key=value` string), which
/// tokio-postgres would refuse (it knows only disable, prefer and require) or ignore.
fn take_ssl_params(url: &str) -> Result<(String, SslParams), PgUrlError> {
    let url = url.trim();
    let prefix = ["postgres://", "postgresql://"].into_iter().find(|prefix| url.starts_with(prefix));
    match prefix {
        Some(prefix) => take_from_url(url, prefix.len()),
        None => take_from_key_values(url),
    }
}

fn take_from_url(url: &str, prefix_len: usize) -> Result<(String, SslParams), PgUrlError> {
    // As tokio-postgres reads it: the credentials end at the first '@', the query starts at the
    // first '?' after them.
    let rest = &url[prefix_len..];
    let after_credentials = rest.find('@').map_or(0, |at| at + 1);
    let Some(question) = rest[after_credentials..].find('?').map(|q| prefix_len + after_credentials + q) else {
        return Ok((url.to_owned(), SslParams::default()));
    };
    let mut ssl = SslParams::default();
    let mut kept = Vec::new();
    for pair in url[question + 1..].split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(key)?;
        match key.as_str() {
            "sslmode" => ssl.mode = Some(decode(value)?),
            "sslrootcert" => ssl.root_cert = Some(decode(value)?),
            _ => kept.push(pair),
        }
    }
    let mut rest = url[..question].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, ssl))
}

fn decode(text: &str) -> Result<String, PgUrlError> {
    percent_encoding::percent_decode_str(text)
        .decode_utf8()
        .map(|text| text.into_owned())
        .map_err(|_| PgUrlError::Invalid("a query parameter is not UTF-8 once percent-decoded".into()))
}

/// libpq's `key = value ...` form, with values quoted in `'` and `\` escapes, read as
/// tokio-postgres reads it; anything it cannot read is left for tokio-postgres to refuse.
fn take_from_key_values(text: &str) -> Result<(String, SslParams), PgUrlError> {
    let mut ssl = SslParams::default();
    let mut kept: Vec<&str> = Vec::new();
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let at = |i: usize| chars.get(i).map_or(text.len(), |&(offset, _)| offset);
    let mut i = 0;
    loop {
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        if i >= chars.len() {
            break;
        }
        let start = i;
        while chars.get(i).is_some_and(|&(_, c)| !c.is_whitespace() && c != '=') {
            i += 1;
        }
        let key = &text[at(start)..at(i)];
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        if key.is_empty() || chars.get(i).map(|&(_, c)| c) != Some('=') {
            return Ok((text.to_owned(), SslParams::default()));
        }
        i += 1;
        while chars.get(i).is_some_and(|(_, c)| c.is_whitespace()) {
            i += 1;
        }
        let mut value = String::new();
        let quoted = chars.get(i).map(|&(_, c)| c) == Some('\'');
        if quoted {
            i += 1;
        }
        loop {
            match chars.get(i).map(|&(_, c)| c) {
                None if quoted => return Ok((text.to_owned(), SslParams::default())),
                None => break,
                Some('\'') if quoted => {
                    i += 1;
                    break;
                }
                Some(c) if c.is_whitespace() && !quoted => break,
                Some('\\') => {
                    if let Some(&(_, escaped)) = chars.get(i + 1) {
                        value.push(escaped);
                    }
                    i += 2;
                }
                Some(c) => {
                    value.push(c);
                    i += 1;
                }
            }
        }
        match key {
            "sslmode" => ssl.mode = Some(value),
            "sslrootcert" => ssl.root_cert = Some(value),
            _ => kept.push(&text[at(start)..at(i)]),
        }
    }
    Ok((kept.join(" "), ssl))
}

// --- TLS -------------------------------------------------------------------------------------

fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER.get_or_init(|| Arc::new(rustls::crypto::ring::default_provider())).clone()
}

fn builtin_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS.get_or_init(|| Arc::new(RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() })).clone()
}

fn file_roots(path: &Path) -> Result<Arc<RootCertStore>, PgUrlError> {
    let failed = |reason: String| PgUrlError::RootCert { path: path.to_owned(), reason };
    let bytes = std::fs::read(path).map_err(|e| failed(format!("cannot be read: {e}")))?;
    let mut store = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(&bytes) {
        let certificate = certificate.map_err(|e| failed(format!("is not a PEM file of certificates: {e}")))?;
        store.add(certificate).map_err(|e| failed(format!("holds a certificate that cannot be a CA: {e}")))?;
    }
    if store.is_empty() {
        return Err(failed("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
    }
    Ok(Arc::new(store))
}

/// The rustls configuration `mode` and `roots` call for.
fn client_config(mode: SslMode, roots: &RootCerts) -> Result<ClientConfig, PgUrlError> {
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| PgUrlError::Tls(e.to_string()))?;
    let algorithms = provider.signature_verification_algorithms;
    let config = match (mode, roots) {
        // The connector is never used: tokio-postgres is told not to negotiate TLS.
        (SslMode::Disable, _) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(RelaxedVerifier { check: Check::Nothing, algorithms }))
            .with_no_client_auth(),
        (SslMode::Allow | SslMode::Prefer | SslMode::Require, RootCerts::BuiltIn) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(RelaxedVerifier { check: Check::Nothing, algorithms }))
            .with_no_client_auth(),
        // libpq: "if a root CA file exists, the behavior of sslmode=require will be the same
        // as that of verify-ca".
        (SslMode::Allow | SslMode::Prefer | SslMode::Require, RootCerts::File(path)) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(RelaxedVerifier {
                check: Check::ChainOnly(file_roots(path)?),
                algorithms,
            }))
            .with_no_client_auth(),
        (SslMode::VerifyCa, roots) => {
            let roots = match roots {
                RootCerts::File(path) => file_roots(path)?,
                RootCerts::BuiltIn => builtin_roots(),
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(RelaxedVerifier {
                    check: Check::ChainOnly(roots),
                    algorithms,
                }))
                .with_no_client_auth()
        }
        (SslMode::VerifyFull, roots) => {
            let roots = match roots {
                RootCerts::File(path) => file_roots(path)?,
                RootCerts::BuiltIn => builtin_roots(),
            };
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(config)
}

/// The certificate checks libpq makes short of `verify-full`, which rustls's own verifier does.
#[derive(Debug)]
enum Check {
    /// `sslmode=require` (and `prefer`) without `sslrootcert`: libpq encrypts but does not
    /// check the server's certificate at all, so neither does this. The connection is private
    /// from passive listeners, not from an active man in the middle (channel binding with SCRAM
    /// still detects one, where the server offers it).
    Nothing,
    /// `sslmode=verify-ca`: the chain must lead to a trusted root (and be valid now), but the
    /// certificate need not name the host connected to.
    ChainOnly(Arc<RootCertStore>),
}

/// A verifier for a [`Check`]. Either way the handshake's signatures are verified against the
/// presented certificate, which is what proves the server holds its key.
#[derive(Debug)]
struct RelaxedVerifier {
    check: Check,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for RelaxedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Check::ChainOnly(roots) = &self.check {
            let certificate = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &certificate,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> (String, SslParams) {
        take_ssl_params(url).expect("splits")
    }

    fn params(mode: Option<&str>, root_cert: Option<&str>) -> SslParams {
        SslParams { mode: mode.map(str::to_owned), root_cert: root_cert.map(str::to_owned) }
    }

    #[test]
    fn a_url_without_tls_parameters_is_left_as_it_is() {
        for url in ["postgres://u:p@localhost:5432/db", "postgresql://h/db?application_name=x", "postgres://h"] {
            assert_eq!(split(url), (url.to_owned(), SslParams::default()));
        }
    }

    #[test]
    fn the_tls_parameters_are_taken_out_of_the_query() {
        assert_eq!(
            split("postgres://u:p@db.example.com:6432/app?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem"),
            ("postgres://u:p@db.example.com:6432/app".to_owned(), params(Some("verify-full"), Some("/tmp/ca.pem")))
        );
        assert_eq!(
            split("postgres://h/db?application_name=a&sslmode=require&connect_timeout=3"),
            ("postgres://h/db?application_name=a&connect_timeout=3".to_owned(), params(Some("require"), None))
        );
        assert_eq!(
            split("postgres://h?sslrootcert=ca.pem&"),
            ("postgres://h".to_owned(), params(None, Some("ca.pem")))
        );
    }

    #[test]
    fn a_question_mark_in_the_password_does_not_start_the_query() {
        assert_eq!(
            split("postgres://u:pa?ss@h/db?sslmode=disable"),
            ("postgres://u:pa?ss@h/db".to_owned(), params(Some("disable"), None))
        );
    }

    #[test]
    fn the_key_value_form_has_its_tls_parameters_taken_out() {
        assert_eq!(
            split("host=localhost  sslmode = verify-ca dbname='my db' sslrootcert='/a b/ca.pem' user=u"),
            ("host=localhost dbname='my db' user=u".to_owned(), params(Some("verify-ca"), Some("/a b/ca.pem")))
        );
        assert_eq!(
            split(r"password=a\ b sslmode=require"),
            (r"password=a\ b".to_owned(), params(Some("require"), None))
        );
    }

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
            assert_eq!(target.ssl_mode().as_str(), mode);
            assert_eq!(target.config().get_ssl_mode(), negotiation, "{mode}");
            assert_eq!(target.root_certs(), &RootCerts::BuiltIn);
            assert_eq!(target.config().get_password(), Some(&b"secret"[..]));
        }
    }

    #[test]
    fn prefer_is_the_default_and_system_roots_mean_verify_full() {
        let target = PgTarget::parse("postgres://h/db").expect("parses");
        assert_eq!(target.ssl_mode(), SslMode::Prefer);
        let target = PgTarget::parse("postgres://h/db?sslrootcert=system").expect("parses");
        assert_eq!(target.ssl_mode(), SslMode::VerifyFull);
        assert_eq!(target.root_certs(), &RootCerts::BuiltIn);
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
        assert_eq!(target.root_certs(), &RootCerts::File(missing.into()));
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
    fn certificate_failures_are_explained() {
        let target = PgTarget::parse("postgres://localhost:6432/db?sslmode=verify-full").unwrap();
        let unknown = target.explain_tls(&rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer));
        assert!(unknown.starts_with("the server's TLS certificate is not trusted: no CA in the built-in"), "{unknown}");
        let name = target.explain_tls(&rustls::Error::InvalidCertificate(CertificateError::NotValidForName));
        assert!(name.starts_with("the server's TLS certificate does not name the host localhost"), "{name}");
        let expired = target.explain_tls(&rustls::Error::InvalidCertificate(CertificateError::Expired));
        assert!(expired.starts_with("the server's TLS certificate has expired"), "{expired}");
    }
}
