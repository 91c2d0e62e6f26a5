//! A guest's request to another host, as the runner sends it: the name is resolved once, every
//! address is checked, and the connection goes to an address that passed, so a name cannot
//! resolve to one address for the check and another for the connection (DNS rebinding).
//!
//! The check: a destination that `allowed_outbound_hosts` admits only through a wildcard
//! (`*.example.com`, `*`) must not be a private, loopback, link-local or otherwise internal
//! address; one that an entry names exactly (`relay.internal`, `127.0.0.1:41000`) may be,
//! since the operator chose that host. Spin does not check addresses at all; under Spin, the
//! allowlist's names are all there is (docs/architecture.md, "Callbacks").
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::outbound::Admission;

/// Why a request could not be sent; the glue turns it into its release's `wasi:http` error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NetworkError {
    #[error("the request has no host")]
    NoHost,
    #[error("the name did not resolve")]
    Dns,
    #[error("every address of the host is private, and only a wildcard admits it")]
    Prohibited,
    #[error("no connection within the timeout")]
    ConnectTimeout,
    #[error("the connection was refused or failed")]
    Connect,
    #[error("the TLS handshake failed")]
    Tls,
    #[error("no answer within the timeout")]
    ResponseTimeout,
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
}

impl NetworkError {
    /// The failure as a span's `error.type`.
    pub(crate) fn error_type(&self) -> &'static str {
        match self {
            NetworkError::NoHost => "no_host",
            NetworkError::Dns => "dns",
            NetworkError::Prohibited => "destination_prohibited",
            NetworkError::ConnectTimeout => "connect_timeout",
            NetworkError::Connect => "connection_refused",
            NetworkError::Tls => "tls",
            NetworkError::ResponseTimeout => "response_timeout",
            NetworkError::Http(_) => "http",
        }
    }
}

/// How long each step may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    pub connect: Duration,
    pub first_byte: Duration,
}

/// The connection, driven on a task of its own until the answer's body is read (or dropped):
/// awaiting it tells how the exchange ended.
pub(crate) type Connection = tokio::task::JoinHandle<Result<(), hyper::Error>>;

/// Sends `request` to its host and answers the response's head; the body streams after.
pub(crate) async fn send<B>(
    mut request: Request<B>,
    admission: Admission,
    timeouts: Timeouts,
) -> Result<(Response<hyper::body::Incoming>, Connection), NetworkError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let uri = request.uri().clone();
    let host = uri.host().ok_or(NetworkError::NoHost)?.trim_start_matches('[').trim_end_matches(']').to_owned();
    let tls = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let addresses = resolve(&host, port).await?;
    let allowed: Vec<SocketAddr> =
        addresses.into_iter().filter(|address| admission == Admission::Exact || is_public(address.ip())).collect();
    if allowed.is_empty() {
        return Err(NetworkError::Prohibited);
    }
    let stream = tokio::time::timeout(timeouts.connect, connect_any(&allowed))
        .await
        .map_err(|_| NetworkError::ConnectTimeout)??;
    let (mut sender, connection) = if tls {
        let name = rustls::pki_types::ServerName::try_from(host).map_err(|_| NetworkError::Tls)?;
        let stream = tls_connector()?.connect(name, stream).await.map_err(|_| NetworkError::Tls)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        (sender, tokio::spawn(connection))
    } else {
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        (sender, tokio::spawn(connection))
    };
    // The request line carries the path only; the host is in the Host header already.
    *request.uri_mut() = origin_form(&uri);
    let response = tokio::time::timeout(timeouts.first_byte, sender.send_request(request)).await;
    let response = response.map_err(|_| NetworkError::ResponseTimeout)??;
    Ok((response, connection))
}

/// Every address of `host`: an IP literal as it is, a name through the resolver.
async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>, NetworkError> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let found = tokio::net::lookup_host((host, port)).await.map_err(|_| NetworkError::Dns)?;
    let addresses: Vec<SocketAddr> = found.collect();
    if addresses.is_empty() { Err(NetworkError::Dns) } else { Ok(addresses) }
}

/// The first address that takes the connection, in the resolver's order.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, NetworkError> {
    for address in addresses {
        if let Ok(stream) = TcpStream::connect(address).await {
            let _ = stream.set_nodelay(true);
            return Ok(stream);
        }
    }
    Err(NetworkError::Connect)
}

fn origin_form(uri: &Uri) -> Uri {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    path.parse().unwrap_or_else(|_| Uri::from_static("/"))
}

/// The web PKI's roots, as Spin and wasmtime's default client trust.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, NetworkError> {
    static CONFIG: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .ok()
            .map(|builder| Arc::new(builder.with_root_certificates(roots).with_no_client_auth()))
    });
    config.clone().map(tokio_rustls::TlsConnector::from).ok_or(NetworkError::Tls)
}

/// Whether `ip` is an address on the public internet: not loopback, private (RFC 1918, unique
/// local), link-local, shared (carrier-grade NAT), documentation, benchmarking, multicast,
/// broadcast or unspecified; an IPv4-mapped IPv6 address is judged as its IPv4 one.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 192 && b == 0 && c == 0)
                || (a == 198 && (18..20).contains(&b))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0x0db8)
        }
    }
}

/// The answer's body as the glue hands it to the guest.
pub(crate) fn boxed<E>(
    response: Response<hyper::body::Incoming>,
    error: fn(hyper::Error) -> E,
) -> Response<http_body_util::combinators::UnsyncBoxBody<Bytes, E>>
where
    E: 'static,
{
    response.map(|body| body.map_err(error).boxed_unsync())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_not_public() {
        for internal in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
        ] {
            assert!(!is_public(internal.parse().expect("an address")), "{internal}");
        }
        for public in ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            assert!(is_public(public.parse().expect("an address")), "{public}");
        }
    }

    #[tokio::test]
    async fn a_wildcard_never_reaches_a_private_address_and_an_exact_entry_may() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://localhost:{}/", listener.local_addr().expect("an address").port());
        let timeouts = Timeouts { connect: Duration::from_secs(2), first_byte: Duration::from_secs(2) };
        let request = || Request::get(&url).body(http_body_util::Empty::<Bytes>::new()).expect("a request");
        let refused = send(request(), Admission::Wildcard, timeouts).await;
        assert!(matches!(refused, Err(NetworkError::Prohibited)), "{:?}", refused.err());
        // Exact: the connection is made (the listener never answers, so the first byte times out).
        let exact = send(request(), Admission::Exact, Timeouts { first_byte: Duration::from_millis(200), ..timeouts });
        assert!(matches!(exact.await, Err(NetworkError::ResponseTimeout)));
    }
}
