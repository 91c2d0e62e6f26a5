//! What a failure to connect most likely means, in words an operator can act on: a certificate
//! that is not trusted or does not name the host, a server without TLS where the mode requires
//! it, a server that requires TLS where the mode disables it.
use rustls::CertificateError;
use tokio_postgres::config::Host;

use crate::error::error_text;
use crate::mode::{RootCerts, SslMode};

/// What was asked for when the connection failed.
pub(crate) struct Attempt<'a> {
    pub config: &'a tokio_postgres::Config,
    pub mode: SslMode,
    pub roots: &'a RootCerts,
}

/// The explanation of `error`, when it is one of the failures recognised here.
pub(crate) fn explain(attempt: &Attempt<'_>, error: &tokio_postgres::Error) -> Option<String> {
    if let Some(tls) = rustls_error(error) {
        return Some(explain_tls(attempt, tls));
    }
    let chain = error_text(error);
    if chain.contains("server does not support TLS") {
        return Some(format!(
            "the server does not offer TLS, which sslmode={} requires (sslmode=disable or prefer connects without it)",
            attempt.mode
        ));
    }
    if let Some(db) = error.as_db_error() {
        let message = db.message();
        let asks_for_tls = ["SSL", "ssl", "encryption", "TLS"].iter().any(|word| message.contains(word));
        if attempt.mode == SslMode::Disable && asks_for_tls {
            return Some(format!(
                "the server refused a connection without TLS ({message}): set sslmode=require, or verify-full with \
                 sslrootcert"
            ));
        }
    }
    None
}

/// Which CA certificates were trusted, and how to name others.
fn trusted(roots: &RootCerts) -> String {
    match roots {
        RootCerts::File(path) => format!("sslrootcert {}", path.display()),
        RootCerts::BuiltIn => "the built-in web PKI roots (name the server's CA with sslrootcert=<file>)".into(),
    }
}

fn explain_tls(attempt: &Attempt<'_>, error: &rustls::Error) -> String {
    let certificate = match error {
        rustls::Error::InvalidCertificate(certificate) => certificate,
        rustls::Error::AlertReceived(alert) => {
            return format!("the server ended the TLS handshake with the alert {alert:?}");
        }
        rustls::Error::NoCertificatesPresented => return "the server presented no TLS certificate".into(),
        other => return format!("the TLS handshake failed: {other}"),
    };
    let host = attempt.config.get_hosts().first().map(|host| match host {
        Host::Tcp(host) => host.clone(),
        #[cfg(unix)]
        Host::Unix(path) => path.display().to_string(),
    });
    match certificate {
        CertificateError::UnknownIssuer => {
            format!("the server's TLS certificate is not trusted: no CA in {} issued it", trusted(attempt.roots))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificate_failures_are_explained() {
        let url = crate::url::parse("postgres://localhost:6432/db?sslmode=verify-full").unwrap();
        let attempt = Attempt { config: &url.config, mode: url.mode, roots: &url.roots };
        let explain = |error| explain_tls(&attempt, &rustls::Error::InvalidCertificate(error));
        let unknown = explain(CertificateError::UnknownIssuer);
        assert!(unknown.starts_with("the server's TLS certificate is not trusted: no CA in the built-in"), "{unknown}");
        let name = explain(CertificateError::NotValidForName);
        assert!(name.starts_with("the server's TLS certificate does not name the host localhost"), "{name}");
        let expired = explain(CertificateError::Expired);
        assert!(expired.starts_with("the server's TLS certificate has expired"), "{expired}");
    }

    #[test]
    fn a_rustls_error_is_found_inside_an_io_error() {
        let wrapped = std::io::Error::other(rustls::Error::NoCertificatesPresented);
        assert_eq!(rustls_error(&wrapped), Some(&rustls::Error::NoCertificatesPresented));
        assert_eq!(rustls_error(&std::io::Error::other("reset")), None);
    }
}
