//! `allowed_outbound_hosts`: which network destinations a component may reach.
//!
//! Entries take Spin's form `scheme://host[:port]`: the scheme may be `*`, the host may be `*`
//! or `*.suffix`, the port may be `*` or a range `a..b`, and a missing port means the scheme's
//! default. `insecure:allow-all` admits everything. Anything not admitted is refused.

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum OutboundError {
    #[error("invalid allowed_outbound_hosts entry {0:?}: expected scheme://host[:port]")]
    Invalid(String),
    #[error("allowed_outbound_hosts entry {0:?} needs a port: its scheme has no default")]
    NoDefaultPort(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    Any,
    Exact(String),
    Suffix(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PortPattern {
    Any,
    Range(u16, u16),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    scheme: Option<String>,
    host: HostPattern,
    port: PortPattern,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AllowedHosts {
    allow_all: bool,
    entries: Vec<Entry>,
}

/// The host name suffix of service chaining: `http://<component id>.spin.internal/...`.
pub(crate) const CHAINING_SUFFIX: &str = ".spin.internal";

/// How an outbound destination was admitted (see [`AllowedHosts::admission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Exact,
    Wildcard,
}

pub(crate) fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        "postgres" => Some(5432),
        "mysql" => Some(3306),
        "redis" => Some(6379),
        "mqtt" => Some(1883),
        _ => None,
    }
}

impl AllowedHosts {
    pub(crate) fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowedHosts, OutboundError> {
        let mut allowed = AllowedHosts::default();
        for raw in entries {
            let raw = raw.as_ref().trim();
            if raw == "insecure:allow-all" {
                allowed.allow_all = true;
                continue;
            }
            allowed.entries.push(parse_entry(raw)?);
        }
        Ok(allowed)
    }

    /// Whether `scheme://host:port` may be reached. `port` is the effective port.
    pub(crate) fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        self.admission(scheme, host, port).is_some()
    }

    /// How `scheme://host:port` is admitted, if it is: by an entry naming its host exactly, or
    /// only by a wildcard (`*`, `*.suffix`, `insecure:allow-all`). An exact entry is the
    /// operator's choice of that host wherever it resolves; a wildcard must not lead to a
    /// private address (see `network`).
    pub(crate) fn admission(&self, scheme: &str, host: &str, port: u16) -> Option<Admission> {
        let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
        let matching = |e: &&Entry| {
            e.scheme.as_deref().is_none_or(|s| s == scheme)
                && match &e.host {
                    HostPattern::Any => true,
                    HostPattern::Exact(h) => *h == host,
                    HostPattern::Suffix(s) => host.ends_with(s.as_str()) && host.len() > s.len(),
                }
                && match e.port {
                    PortPattern::Any => true,
                    PortPattern::Range(lo, hi) => (lo..=hi).contains(&port),
                }
        };
        let admitting: Vec<&Entry> = self.entries.iter().filter(matching).collect();
        if admitting.iter().any(|e| matches!(e.host, HostPattern::Exact(_))) {
            Some(Admission::Exact)
        } else if !admitting.is_empty() || self.allow_all {
            Some(Admission::Wildcard)
        } else {
            None
        }
    }

    /// Whether a URL such as `postgres://user@db:5432/x` or `http://a.spin.internal/p` may be reached.
    pub(crate) fn allows_url(&self, url: &str) -> bool {
        match url::Url::parse(url) {
            Ok(parsed) => {
                let scheme = parsed.scheme();
                let Some(host) = parsed.host_str() else { return false };
                let Some(port) = parsed.port().or_else(|| default_port(scheme)) else { return false };
                self.allows(scheme, host, port)
            }
            Err(_) => false,
        }
    }
}

fn parse_entry(raw: &str) -> Result<Entry, OutboundError> {
    let invalid = || OutboundError::Invalid(raw.to_owned());
    let (scheme, rest) = raw.split_once("://").ok_or_else(invalid)?;
    let rest = rest.trim_end_matches('/');
    if scheme.is_empty() || rest.is_empty() || rest.contains('/') {
        return Err(invalid());
    }
    // An IPv6 literal keeps its colons inside brackets.
    let (host, port) = if let Some(stripped) = rest.strip_prefix('[') {
        let (h, after) = stripped.split_once(']').ok_or_else(invalid)?;
        (h, after.strip_prefix(':'))
    } else {
        match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        }
    };
    let host = match host {
        "*" => HostPattern::Any,
        h if h.starts_with("*.") => HostPattern::Suffix(h[1..].to_ascii_lowercase()),
        h if h.is_empty() || h.contains('*') => return Err(invalid()),
        h => HostPattern::Exact(h.to_ascii_lowercase()),
    };
    let port = match port {
        Some("*") => PortPattern::Any,
        Some(p) => match p.split_once("..") {
            Some((lo, hi)) => {
                PortPattern::Range(lo.parse().map_err(|_| invalid())?, hi.parse().map_err(|_| invalid())?)
            }
            None => {
                let n = p.parse().map_err(|_| invalid())?;
                PortPattern::Range(n, n)
            }
        },
        None if scheme == "*" => return Err(OutboundError::NoDefaultPort(raw.to_owned())),
        None => {
            let n = default_port(scheme).ok_or_else(|| OutboundError::NoDefaultPort(raw.to_owned()))?;
            PortPattern::Range(n, n)
        }
    };
    let scheme = (scheme != "*").then(|| scheme.to_owned());
    Ok(Entry { scheme, host, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(entries).expect("valid entries")
    }

    #[test]
    fn exact_hosts_with_default_and_explicit_ports() {
        let h = hosts(&["https://gmail.googleapis.com", "postgres://127.0.0.1:5433"]);
        assert!(h.allows_url("https://gmail.googleapis.com/gmail/v1/users/me/drafts"));
        assert!(!h.allows_url("http://gmail.googleapis.com/"));
        assert!(!h.allows_url("https://gmail.googleapis.com:8443/"));
        assert!(h.allows_url("postgres://postgres@127.0.0.1:5433/gatehouse"));
        assert!(!h.allows_url("postgres://postgres@127.0.0.1/gatehouse"));
        assert!(!h.allows_url("https://evil.example.com/"));
    }

    #[test]
    fn wildcards() {
        let h = hosts(&[
            "http://127.0.0.1:*",
            "http://*.spin.internal",
            "*://cache.local:6379",
            "https://api.test:8000..8010",
        ]);
        assert!(h.allows_url("http://127.0.0.1:3000/callback"));
        assert!(h.allows_url("http://async-executor.spin.internal/run"));
        assert!(!h.allows_url("http://spin.internal/"));
        assert!(h.allows("redis", "cache.local", 6379));
        assert!(h.allows_url("https://api.test:8005/"));
        assert!(!h.allows_url("https://api.test:8011/"));
        assert!(!h.allows_url("http://localhost:3000/"));
    }

    #[test]
    fn an_exact_entry_admits_explicitly_and_a_wildcard_does_not() {
        let h = hosts(&["https://relay.example.com", "https://*.example.com", "http://127.0.0.1:41000..41999"]);
        assert_eq!(h.admission("https", "relay.example.com", 443), Some(Admission::Exact));
        assert_eq!(h.admission("https", "other.example.com", 443), Some(Admission::Wildcard));
        assert_eq!(h.admission("http", "127.0.0.1", 41500), Some(Admission::Exact));
        assert_eq!(h.admission("http", "127.0.0.1", 22), None);
        assert_eq!(hosts(&["insecure:allow-all"]).admission("http", "10.0.0.1", 80), Some(Admission::Wildcard));
    }

    #[test]
    fn allow_all_and_empty() {
        assert!(hosts(&["insecure:allow-all"]).allows_url("https://anything.example/"));
        assert!(!hosts(&[]).allows_url("http://127.0.0.1/"));
    }

    #[test]
    fn rejects_malformed_entries() {
        assert!(AllowedHosts::parse(&["127.0.0.1"]).is_err());
        assert!(AllowedHosts::parse(&["*://host"]).is_err());
        assert!(AllowedHosts::parse(&["ftp://host"]).is_err());
        assert!(AllowedHosts::parse(&["http://host/path"]).is_err());
        assert!(AllowedHosts::parse(&["http://host:x"]).is_err());
    }
}
