//! Email addresses as the tool accepts them: a bare RFC 5322 `addr-spec` in dot-atom form,
//! which is what a voice agent produces. Anything that could smuggle a header (CR, LF, a
//! comma, angle brackets) is not an address.

use std::fmt;

/// A checked address: the local part as given, the domain in lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address(String);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error("contains a line break")]
    LineBreak,
    #[error("is empty")]
    Empty,
    #[error("'{0}' is not an email address: it needs exactly one @")]
    NoAt(String),
    #[error("'{0}' is not an email address: the part before the @ is not valid")]
    LocalPart(String),
    #[error("'{0}' is not an email address: the domain is not valid")]
    Domain(String),
}

const LOCAL_MAX: usize = 64;
const DOMAIN_MAX: usize = 253;

impl Address {
    pub fn parse(input: &str) -> Result<Address, AddressError> {
        if input.contains(['\r', '\n']) {
            return Err(AddressError::LineBreak);
        }
        let text = input.trim();
        if text.is_empty() {
            return Err(AddressError::Empty);
        }
        let (local, domain) = match text.split_once('@') {
            Some((local, domain)) if !domain.contains('@') => (local, domain),
            _ => return Err(AddressError::NoAt(text.to_owned())),
        };
        if !valid_local(local) {
            return Err(AddressError::LocalPart(text.to_owned()));
        }
        let domain = domain.to_ascii_lowercase();
        if !valid_domain(&domain) {
            return Err(AddressError::Domain(text.to_owned()));
        }
        Ok(Address(format!("{local}@{domain}")))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn domain(&self) -> &str {
        self.0.rsplit_once('@').map_or("", |(_, domain)| domain)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn atext(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-/=?^_`{|}~".contains(c)
}

fn valid_local(local: &str) -> bool {
    !local.is_empty()
        && local.len() <= LOCAL_MAX
        && local.split('.').all(|atom| !atom.is_empty() && atom.chars().all(atext))
}

fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    let label_ok = |label: &&str| {
        !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    let tld_ok = labels.last().is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()));
    domain.len() <= DOMAIN_MAX && labels.len() >= 2 && labels.iter().all(label_ok) && tld_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_addresses_and_lowercases_the_domain() {
        assert_eq!(Address::parse(" John.Smith@Gmail.COM ").unwrap().as_str(), "John.Smith@gmail.com");
        assert_eq!(Address::parse("a+tag@sub.example.org").unwrap().domain(), "sub.example.org");
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        for bad in [
            "john",
            "john@",
            "@gmail.com",
            "john@gmail",
            "jo hn@gmail.com",
            "a..b@x.com",
            ".a@x.com",
            "a@-x.com",
            "a@x.c0m",
            "a@b@c.com",
            "John <john@x.com>",
            "a,b@x.com",
        ] {
            assert!(Address::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn a_line_break_is_never_an_address() {
        assert_eq!(Address::parse("john@x.com\r\nBcc: evil@x.com"), Err(AddressError::LineBreak));
        assert_eq!(Address::parse("john@x.com\n"), Err(AddressError::LineBreak));
    }
}
