//! Reading a database URL: its TLS parameters (`sslmode`, `sslrootcert`) taken out and
//! resolved to a policy, the rest left to tokio-postgres.
use std::path::PathBuf;

use crate::error::{PgUrlError, error_text};
use crate::mode::{RootCerts, SslMode};

/// A URL, read: tokio-postgres's settings (told how to negotiate TLS) and the TLS policy.
#[derive(Debug)]
pub(crate) struct ParsedUrl {
    pub config: tokio_postgres::Config,
    pub mode: SslMode,
    pub roots: RootCerts,
}

/// Reads a `postgres://` URL (or a libpq `key=value` string) with its `sslmode` and
/// `sslrootcert`. The root certificate file is not read here.
pub(crate) fn parse(url: &str) -> Result<ParsedUrl, PgUrlError> {
    let (rest, ssl) = take_ssl_params(url)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| PgUrlError::Invalid(error_text(&e)))?;
    let system = ssl.root_cert.as_deref() == Some("system");
    let mode = match ssl.mode.as_deref() {
        Some(mode) => SslMode::from_name(mode).ok_or_else(|| PgUrlError::SslMode(mode.to_owned()))?,
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
    Ok(ParsedUrl { config, mode, roots })
}

/// The TLS parameters of a URL, as written in it.
#[derive(Debug, Default, PartialEq, Eq)]
struct SslParams {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// Takes `sslmode` and `sslrootcert` out of a URL's query (or a `key=value` string), which
/// tokio-postgres would refuse (it knows only disable, prefer and require) or ignore; answers
/// the URL without them, and them.
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
}
