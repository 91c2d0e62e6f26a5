//! Percent-encoding for the URLs and forms sent to Gmail and its token endpoint.

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_keeps_only_unreserved_characters() {
        assert_eq!(percent_encode("rfc822msgid:<a.b@x.com> in:sent"), "rfc822msgid%3A%3Ca.b%40x.com%3E%20in%3Asent");
        assert_eq!(percent_encode("a-b_c.d~"), "a-b_c.d~");
    }
}
