//! The TLS policy a URL asks for: libpq's `sslmode`, and where the trusted CA certificates come
//! from (`sslrootcert`).
use std::fmt;
use std::path::PathBuf;

/// libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, plain otherwise. libpq tries a plain connection first;
    /// here it is `Prefer`, which tries TLS first (both accept either).
    Allow,
    /// TLS when the server offers it, plain otherwise (libpq's default). The certificate is
    /// checked only against an `sslrootcert` file (then as `VerifyCa`).
    Prefer,
    /// TLS or no connection. The certificate is checked only against an `sslrootcert` file
    /// (then as `VerifyCa`).
    Require,
    /// TLS; the certificate must chain to a trusted CA (the host name is not checked).
    VerifyCa,
    /// TLS; the certificate must chain to a trusted CA and name the host.
    VerifyFull,
}

impl SslMode {
    pub(crate) const ALL: [SslMode; 6] =
        [SslMode::Disable, SslMode::Allow, SslMode::Prefer, SslMode::Require, SslMode::VerifyCa, SslMode::VerifyFull];

    /// The mode libpq spells `value`, if any.
    pub(crate) fn from_name(value: &str) -> Option<SslMode> {
        SslMode::ALL.into_iter().find(|mode| mode.as_str() == value)
    }

    /// The mode as libpq spells it.
    pub fn as_str(self) -> &'static str {
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
    pub(crate) fn negotiation(self) -> tokio_postgres::config::SslMode {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_is_read_back_from_its_own_name_and_no_other_name_is_a_mode() {
        for mode in SslMode::ALL {
            assert_eq!(SslMode::from_name(mode.as_str()), Some(mode));
            assert_eq!(mode.to_string(), mode.as_str());
        }
        for other in ["", "verify", "VERIFY-FULL", "required", " require"] {
            assert_eq!(SslMode::from_name(other), None, "{other:?}");
        }
    }
}
