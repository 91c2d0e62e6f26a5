//! Just enough RFC 5322 to do what Gmail does with a raw message before sending it: read the
//! header block (unfolding continuation lines), find the Message-ID and the recipients. The
//! body is never parsed.
use base64::Engine;

/// The header fields of a message, in order, unfolded.
#[derive(Clone, Debug, Default)]
pub(crate) struct HeaderBlock {
    fields: Vec<(String, String)>,
}

/// A recipient header that does not hold a list of addresses.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct InvalidRecipientHeader(pub &'static str);

pub(crate) const RECIPIENT_HEADERS: [&str; 3] = ["To", "Cc", "Bcc"];

impl HeaderBlock {
    pub fn parse(raw: &[u8]) -> HeaderBlock {
        let header_end = find_header_end(raw);
        let text = String::from_utf8_lossy(&raw[..header_end]);
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in text.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.starts_with([' ', '\t']) {
                if let Some((_, value)) = fields.last_mut() {
                    if !value.is_empty() {
                        value.push(' ');
                    }
                    value.push_str(line.trim());
                }
                continue;
            }
            // A line that is not a field (no colon) ends nothing and starts nothing; Gmail is
            // as forgiving about stray lines.
            if let Some((name, value)) = line.split_once(':') {
                let name = name.trim();
                if !name.is_empty() && !name.contains(' ') {
                    fields.push((name.to_owned(), value.trim().to_owned()));
                }
            }
        }
        HeaderBlock { fields }
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(field, _)| field.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    pub fn fields(&self) -> &[(String, String)] {
        &self.fields
    }

    pub fn message_id(&self) -> Option<String> {
        self.get("Message-ID").map(str::to_owned).filter(|id| !id.is_empty())
    }

    /// Every address in To, Cc and Bcc, or the first of those headers that is malformed.
    pub fn recipients(&self) -> Result<Vec<String>, InvalidRecipientHeader> {
        let mut all = Vec::new();
        for header in RECIPIENT_HEADERS {
            for (name, value) in &self.fields {
                if name.eq_ignore_ascii_case(header) {
                    all.extend(parse_address_list(value).ok_or(InvalidRecipientHeader(header))?);
                }
            }
        }
        Ok(all)
    }
}

/// Where the header block ends: at the first empty line, or at the end when there is none.
fn find_header_end(raw: &[u8]) -> usize {
    let mut line_start = 0;
    while line_start < raw.len() {
        let line_end = raw[line_start..].iter().position(|&b| b == b'\n').map_or(raw.len(), |i| line_start + i);
        let line = &raw[line_start..line_end];
        if line.is_empty() || line == b"\r" {
            return line_start;
        }
        line_start = line_end + 1;
    }
    raw.len()
}

/// The body: everything after the empty line that ends the header block.
pub(crate) fn body(raw: &[u8]) -> &[u8] {
    let end = find_header_end(raw);
    let rest = &raw[end..];
    let skip = if rest.starts_with(b"\r\n") {
        2
    } else if rest.starts_with(b"\n") {
        1
    } else {
        0
    };
    &rest[skip..]
}

/// The addresses of an address-list header value (`a@x, "B" <b@y>, group: c@z;`), or `None`
/// when one of its members is not an address.
pub(crate) fn parse_address_list(value: &str) -> Option<Vec<String>> {
    let mut addresses = Vec::new();
    for member in split_top_level(value, ',') {
        let mut member = strip_comments(&member);
        // A group ("name: a@x, b@y;") contributes its members; an empty group none.
        if let Some((_, inner)) = split_group(&member) {
            member = inner;
        }
        let member = member.trim().trim_end_matches(';').trim();
        if member.is_empty() {
            continue;
        }
        let address = match (member.rfind('<'), member.rfind('>')) {
            (Some(open), Some(close)) if open < close => member[open + 1..close].trim().to_owned(),
            (None, None) => member.to_owned(),
            _ => return None,
        };
        if !is_address(&address) {
            return None;
        }
        addresses.push(address);
    }
    Some(addresses)
}

fn split_group(member: &str) -> Option<(String, String)> {
    let mut in_quotes = false;
    for (i, c) in member.char_indices() {
        match c {
            '"' => in_quotes = !in_quotes,
            '<' if !in_quotes => return None,
            ':' if !in_quotes => return Some((member[..i].to_owned(), member[i + 1..].to_owned())),
            _ => {}
        }
    }
    None
}

/// Splits on `separator` outside quoted strings, angle brackets and comments.
fn split_top_level(value: &str, separator: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let (mut in_quotes, mut angle, mut comment) = (false, 0u32, 0u32);
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            current.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' if in_quotes || comment > 0 => escaped = true,
            '"' if comment == 0 => in_quotes = !in_quotes,
            '<' if !in_quotes && comment == 0 => angle += 1,
            '>' if !in_quotes && comment == 0 => angle = angle.saturating_sub(1),
            '(' if !in_quotes => comment += 1,
            ')' if !in_quotes => comment = comment.saturating_sub(1),
            _ => {}
        }
        if c == separator && !in_quotes && angle == 0 && comment == 0 {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    parts.push(current);
    parts
}

fn strip_comments(value: &str) -> String {
    let mut out = String::new();
    let (mut depth, mut in_quotes) = (0u32, false);
    for c in value.chars() {
        match c {
            '"' if depth == 0 => {
                in_quotes = !in_quotes;
                out.push(c);
            }
            '(' if !in_quotes => depth += 1,
            ')' if !in_quotes && depth > 0 => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

fn is_address(address: &str) -> bool {
    let Some((local, domain)) = address.rsplit_once('@') else { return false };
    !local.is_empty()
        && !domain.is_empty()
        && !address.chars().any(|c| c.is_whitespace() || c.is_control() || c == '<' || c == '>' || c == ',')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains("..")
        && domain.chars().all(|c| c.is_alphanumeric() || c == '.' || c == '-' || c == '[' || c == ']' || c == ':')
}

/// Strips the angle brackets around a Message-ID, the form Gmail's `rfc822msgid:` accepts both
/// with and without.
pub(crate) fn bare_message_id(id: &str) -> &str {
    let id = id.trim();
    id.strip_prefix('<').and_then(|inner| inner.strip_suffix('>')).unwrap_or(id).trim()
}

/// Decodes RFC 2047 encoded words (`=?UTF-8?B?...?=`, `=?UTF-8?Q?...?=`) for display. Words in
/// charsets other than UTF-8, US-ASCII and ISO-8859-1 are left as they are.
pub(crate) fn decode_encoded_words(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    let mut previous_was_word = false;
    while let Some(start) = rest.find("=?") {
        let (before, candidate) = rest.split_at(start);
        match decode_one_word(candidate) {
            Some((decoded, consumed)) => {
                // Whitespace between two adjacent encoded words is not part of the text.
                if !(previous_was_word && before.trim().is_empty()) {
                    out.push_str(before);
                }
                out.push_str(&decoded);
                rest = &candidate[consumed..];
                previous_was_word = true;
            }
            None => {
                out.push_str(before);
                out.push_str("=?");
                rest = &candidate[2..];
                previous_was_word = false;
            }
        }
    }
    out.push_str(rest);
    out
}

/// One encoded word at the start of `text`: its decoded text and how many bytes it spans.
fn decode_one_word(text: &str) -> Option<(String, usize)> {
    let inner = text.strip_prefix("=?")?;
    let (charset, after_charset) = inner.split_once('?')?;
    let (encoding, after_encoding) = after_charset.split_once('?')?;
    let end = after_encoding.find("?=")?;
    let payload = &after_encoding[..end];
    if payload.contains(' ') {
        return None;
    }
    let consumed = 2 + charset.len() + 1 + encoding.len() + 1 + end + 2;
    let bytes = match encoding {
        "B" | "b" => base64::engine::general_purpose::STANDARD.decode(payload).ok()?,
        "Q" | "q" => decode_q(payload)?,
        _ => return None,
    };
    let charset = charset.split('*').next().unwrap_or(charset).to_ascii_lowercase();
    let decoded = match charset.as_str() {
        "utf-8" | "utf8" | "us-ascii" => String::from_utf8(bytes).ok()?,
        "iso-8859-1" | "latin1" => bytes.iter().map(|&b| char::from(b)).collect(),
        _ => return None,
    };
    Some((decoded, consumed))
}

fn decode_q(payload: &str) -> Option<Vec<u8>> {
    let bytes = payload.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'_' => out.push(b' '),
            b'=' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            other => out.push(other),
        }
        i += 1;
    }
    Some(out)
}

/// The message as its recipients receive it: Gmail delivers to the Bcc addresses but removes
/// the Bcc field (with its folded lines) from what is delivered.
pub(crate) fn without_bcc(raw: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(raw);
    let split = text.find("\r\n\r\n").map(|i| i + 2).or_else(|| text.find("\n\n").map(|i| i + 1)).unwrap_or(text.len());
    let (head, rest) = text.split_at(split);
    let mut kept = String::with_capacity(raw.len());
    let mut skipping = false;
    for line in head.split_inclusive('\n') {
        let continuation = line.starts_with([' ', '\t']);
        if !continuation {
            skipping = line.get(..4).is_some_and(|name| name.eq_ignore_ascii_case("bcc:"));
        }
        if !skipping {
            kept.push_str(line);
        }
    }
    kept.push_str(rest);
    kept.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delivered_copy_has_no_bcc_field_but_keeps_the_rest() {
        let raw =
            b"To: a@x.com\r\nBcc: b@x.com,\r\n c@x.com\r\nSubject: Bcc: is not a header here\r\n\r\nBcc: body text\r\n";
        let delivered = String::from_utf8(without_bcc(raw)).unwrap();
        assert_eq!(delivered, "To: a@x.com\r\nSubject: Bcc: is not a header here\r\n\r\nBcc: body text\r\n");
    }

    #[test]
    fn unfolds_continuation_lines_and_stops_at_the_blank_line() {
        let raw = b"To: a@example.com,\r\n  b@example.com\r\nSubject: Hi\r\nMessage-ID:\r\n <x@y>\r\n\r\nTo: not@header.com\r\n";
        let headers = HeaderBlock::parse(raw);
        assert_eq!(headers.get("to"), Some("a@example.com, b@example.com"));
        assert_eq!(headers.message_id().as_deref(), Some("<x@y>"));
        assert_eq!(headers.recipients().unwrap(), vec!["a@example.com", "b@example.com"]);
        assert_eq!(body(raw), b"To: not@header.com\r\n");
    }

    #[test]
    fn reads_display_names_groups_and_comments() {
        let list = parse_address_list(
            r#""Doe, Jane" <jane@example.com>, team: x@example.org, y@example.org;, (c) z@example.net"#,
        );
        assert_eq!(list.unwrap(), vec!["jane@example.com", "x@example.org", "y@example.org", "z@example.net"]);
        assert_eq!(parse_address_list("undisclosed-recipients:;").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn refuses_what_is_not_an_address() {
        assert!(parse_address_list("not an address").is_none());
        assert!(parse_address_list("a@example.com, @example.com").is_none());
        assert!(parse_address_list("<a@example.com").is_none());
        let headers = HeaderBlock::parse(b"To: a@example.com\r\nCc: nobody\r\n\r\n");
        assert_eq!(headers.recipients(), Err(InvalidRecipientHeader("Cc")));
    }

    #[test]
    fn decodes_encoded_words() {
        assert_eq!(decode_encoded_words("=?UTF-8?B?UmU6IGNhZsOp?= =?utf-8?q?_ol=C3=A9?= !"), "Re: café olé !");
        assert_eq!(decode_encoded_words("plain =?x"), "plain =?x");
        assert_eq!(bare_message_id(" <a@b> "), "a@b");
        assert_eq!(bare_message_id("a@b"), "a@b");
    }
}
