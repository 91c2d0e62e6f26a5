//! `callback_allowed_hosts`: which relays may receive callbacks (docs/architecture.md,
//! "Callbacks").

use thiserror::Error;
use url::Url;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CallbackUrlError {
    #[error("is not an absolute http or https URL")]
    NotHttp,
    #[error("names host {0}, which is not in callback_allowed_hosts")]
    HostNotAllowed(String),
}

/// A parsed `callback_allowed_hosts` list: `host[:port]` entries, comma-separated, where the
/// port may be a range `low..high` (both included, as Spin's `allowed_outbound_hosts` writes
/// it) or `*` for any port, and a missing port admits the scheme's default port only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackAllowlist {
    entries: Vec<(String, Ports)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ports {
    Any,
    Default,
    Range(u16, u16),
}

impl CallbackAllowlist {
    pub fn parse(list: &str) -> CallbackAllowlist {
        let entries = list
            .split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .filter_map(|entry| {
                let (host, ports) = match entry.rsplit_once(':') {
                    Some((host, "*")) => (host, Ports::Any),
                    Some((host, ports)) => match ports.split_once("..") {
                        Some((low, high)) => (host, Ports::Range(low.parse().ok()?, high.parse().ok()?)),
                        None => {
                            let port = ports.parse().ok()?;
                            (host, Ports::Range(port, port))
                        }
                    },
                    None => (entry, Ports::Default),
                };
                Some((host.to_ascii_lowercase(), ports))
            })
            .collect();
        CallbackAllowlist { entries }
    }

    /// How many entries were read (an entry with a port that is not one is left out).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks a callback URL and returns it normalized.
    pub fn check(&self, callback_url: &str) -> Result<String, CallbackUrlError> {
        let url = Url::parse(callback_url).map_err(|_| CallbackUrlError::NotHttp)?;
        if !matches!(url.scheme(), "http" | "https") || !url.username().is_empty() || url.password().is_some() {
            return Err(CallbackUrlError::NotHttp);
        }
        let host = url.host_str().ok_or(CallbackUrlError::NotHttp)?.to_ascii_lowercase();
        let port = url.port_or_known_default().ok_or(CallbackUrlError::NotHttp)?;
        let default_port = url.port().is_none();
        let allowed = self.entries.iter().any(|(allowed_host, ports)| {
            *allowed_host == host
                && match *ports {
                    Ports::Any => true,
                    Ports::Default => default_port,
                    Ports::Range(low, high) => (low..=high).contains(&port),
                }
        });
        if allowed { Ok(url.to_string()) } else { Err(CallbackUrlError::HostNotAllowed(format!("{host}:{port}"))) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_listed_hosts_only() {
        let list = CallbackAllowlist::parse("127.0.0.1:*, relay.example.com, hooks.example.com:8443");
        assert!(list.check("http://127.0.0.1:9000/cb").is_ok());
        assert!(list.check("https://relay.example.com/cb").is_ok());
        assert!(list.check("https://hooks.example.com:8443/x").is_ok());
        assert_eq!(
            list.check("https://relay.example.com:8443/cb"),
            Err(CallbackUrlError::HostNotAllowed("relay.example.com:8443".into()))
        );
        assert!(list.check("http://evil.example.com/cb").is_err());
        assert!(list.check("http://127.0.0.2:9000/cb").is_err());
        assert_eq!(list.check("ftp://127.0.0.1/cb"), Err(CallbackUrlError::NotHttp));
        assert_eq!(list.check("/relative"), Err(CallbackUrlError::NotHttp));
        assert_eq!(list.check("http://user:pw@127.0.0.1:1/"), Err(CallbackUrlError::NotHttp));
    }

    #[test]
    fn a_port_range_admits_its_ports_only() {
        let list = CallbackAllowlist::parse("127.0.0.1:41000..41999");
        assert!(list.check("http://127.0.0.1:41000/cb").is_ok());
        assert!(list.check("http://127.0.0.1:41999/cb").is_ok());
        assert!(list.check("http://127.0.0.1:42000/cb").is_err());
        assert!(list.check("http://127.0.0.1:22/").is_err());
        assert!(CallbackAllowlist::parse("127.0.0.1:9..x").check("http://127.0.0.1:9/").is_err(), "malformed");
    }

    #[test]
    fn an_empty_list_admits_nothing() {
        assert!(CallbackAllowlist::parse("").check("http://127.0.0.1:1/").is_err());
    }
}
