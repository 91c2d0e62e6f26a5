//! The rustls configuration each policy calls for, and the verifier for the checks libpq makes
//! short of `verify-full` (which is rustls's own verifier).
//!
//! rustls with ring, no system OpenSSL; the web PKI roots are built in (`webpki-roots`), so the
//! machine's certificate store plays no part.
use std::path::Path;
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::PgUrlError;
use crate::mode::{RootCerts, SslMode};

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
pub(crate) fn client_config(mode: SslMode, roots: &RootCerts) -> Result<ClientConfig, PgUrlError> {
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

    #[test]
    fn every_mode_without_a_root_file_has_a_configuration() {
        for mode in SslMode::ALL {
            let config = client_config(mode, &RootCerts::BuiltIn);
            assert!(config.is_ok(), "{mode}: {:?}", config.err());
        }
    }
}
