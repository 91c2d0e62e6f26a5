//! RFC 5322 / MIME messages for the Gmail API's `raw` field.
//!
//! Gmail takes the recipients from the To, Cc and Bcc headers and removes Bcc from what the
//! other recipients receive, so the message carries all three. Its `Message-ID` is derived
//! from the tool call, which is how a retry finds out whether the message already went out.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::address::Address;
use crate::params::EmailParameters;

/// An encoded-word carries at most this many bytes of UTF-8, so that with its frame and a
/// leading "Subject: " the line stays within 78 characters.
const ENCODED_WORD_BYTES: usize = 42;
/// Header lines are folded before this length (RFC 5322 §2.1.1 "SHOULD").
const LINE_TARGET: usize = 78;
/// The hard limit for a line of a 7bit body (RFC 5322 §2.1.1 "MUST").
const LINE_LIMIT: usize = 998;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// With its angle brackets, as in the header.
    pub message_id: String,
    pub raw: Vec<u8>,
}

impl Message {
    /// The `Message-ID` of the one message a tool call may send.
    pub fn id_for(tool_call_id: &str, sender: &Address) -> String {
        format!("<gatehouse.{tool_call_id}@{}>", sender.domain())
    }

    pub fn build(sender: &Address, email: &EmailParameters, tool_call_id: &str, unix_seconds: u64) -> Message {
        let message_id = Message::id_for(tool_call_id, sender);
        let mut head = String::new();
        header(&mut head, "From", sender.as_str());
        address_header(&mut head, "To", &email.to);
        address_header(&mut head, "Cc", &email.cc);
        address_header(&mut head, "Bcc", &email.bcc);
        head.push_str(&format!("Subject: {}\r\n", encode_subject(&email.subject)));
        header(&mut head, "Date", &rfc5322_date(unix_seconds));
        header(&mut head, "Message-ID", &message_id);
        header(&mut head, "X-Gatehouse-Tool-Call", tool_call_id);
        header(&mut head, "MIME-Version", "1.0");
        header(&mut head, "Content-Type", "text/plain; charset=UTF-8");
        let body = crlf_lines(&email.body);
        let fits_7bit = body.is_ascii() && body.split("\r\n").all(|line| line.len() <= LINE_LIMIT);
        let encoded = if fits_7bit {
            header(&mut head, "Content-Transfer-Encoding", "7bit");
            body
        } else {
            header(&mut head, "Content-Transfer-Encoding", "base64");
            base64_lines(body.as_bytes())
        };
        let raw = format!("{head}\r\n{encoded}").into_bytes();
        Message { message_id, raw }
    }
}

fn header(head: &mut String, name: &str, value: &str) {
    head.push_str(&format!("{name}: {value}\r\n"));
}

/// An address list, folded between addresses when the line grows long.
fn address_header(head: &mut String, name: &str, addresses: &[Address]) {
    if addresses.is_empty() {
        return;
    }
    let mut line = format!("{name}: ");
    let mut folded = String::new();
    for (index, address) in addresses.iter().enumerate() {
        let piece = if index + 1 < addresses.len() { format!("{address},") } else { address.to_string() };
        if index > 0 {
            if line.len() + 1 + piece.len() > LINE_TARGET {
                folded.push_str(&line);
                folded.push_str("\r\n");
                line = String::new();
            }
            line.push(' ');
        }
        line.push_str(&piece);
    }
    folded.push_str(&line);
    head.push_str(&folded);
    head.push_str("\r\n");
}

/// A subject as header text: plain when it is short printable ASCII, otherwise RFC 2047
/// `B` encoded-words, split on character boundaries and folded one word per line.
pub fn encode_subject(subject: &str) -> String {
    let plain = subject.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !subject.contains("=?")
        && "Subject: ".len() + subject.len() <= LINE_TARGET;
    if plain {
        return subject.to_owned();
    }
    let mut words = Vec::new();
    let mut chunk = String::new();
    for c in subject.chars() {
        if chunk.len() + c.len_utf8() > ENCODED_WORD_BYTES {
            words.push(encoded_word(&chunk));
            chunk.clear();
        }
        chunk.push(c);
    }
    if !chunk.is_empty() {
        words.push(encoded_word(&chunk));
    }
    words.join("\r\n ")
}

fn encoded_word(text: &str) -> String {
    format!("=?UTF-8?B?{}?=", STANDARD.encode(text.as_bytes()))
}

fn crlf_lines(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n").replace('\n', "\r\n")
}

fn base64_lines(bytes: &[u8]) -> String {
    let encoded = STANDARD.encode(bytes);
    let lines: Vec<&str> = encoded.as_bytes().chunks(76).filter_map(|c| std::str::from_utf8(c).ok()).collect();
    lines.join("\r\n")
}

/// `Sun, 22 Nov 2026 09:05:00 +0000`.
fn rfc5322_date(unix_seconds: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let days = unix_seconds / 86_400;
    let seconds = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} +0000",
        DAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), after Howard Hinnant's civil calendar algorithm.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use mail_parser::{HeaderName, MessageParser};
    use serde_json::json;

    use super::*;

    fn email(value: serde_json::Value) -> EmailParameters {
        EmailParameters::parse(value.as_object().unwrap()).unwrap().0
    }

    #[test]
    fn dates_are_rfc5322() {
        assert_eq!(rfc5322_date(0), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(rfc5322_date(1_795_338_300), "Sun, 22 Nov 2026 09:05:00 +0000");
        assert_eq!(rfc5322_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 +0000");
    }

    #[test]
    fn a_real_parser_reads_back_every_part() {
        let sender = Address::parse("gatehouse@example.com").unwrap();
        let subject = "Réunion demain — 会議の議題と、とても長い件名がここに続きます, with more ASCII after it";
        let body = "Bonjour John,\nLet's meet at 10:00. Ça va?\n— Gatehouse";
        let params = email(json!({"to": ["john.smith@gmail.com", "ann@x.org"], "cc": "c@x.org", "bcc": "hidden@x.org",
            "subject": subject, "body": body}));
        let message = Message::build(&sender, &params, "tc_0123456789ab", 1_795_338_300);
        let raw = String::from_utf8(message.raw.clone()).unwrap();
        assert!(raw.lines().all(|line| line.len() <= LINE_TARGET), "a header or body line is too long:\n{raw}");
        assert!(raw.is_ascii(), "the message must be 7-bit clean");

        let parsed = MessageParser::default().parse(&message.raw).unwrap();
        assert_eq!(parsed.subject(), Some(subject));
        assert_eq!(parsed.body_text(0).unwrap().replace("\r\n", "\n"), body);
        assert_eq!(parsed.message_id(), Some("gatehouse.tc_0123456789ab@example.com"));
        assert_eq!(message.message_id, "<gatehouse.tc_0123456789ab@example.com>");
        let to: Vec<&str> = parsed.to().unwrap().iter().filter_map(|a| a.address()).collect();
        assert_eq!(to, ["john.smith@gmail.com", "ann@x.org"]);
        assert_eq!(parsed.cc().unwrap().first().and_then(|a| a.address()), Some("c@x.org"));
        assert_eq!(parsed.from().unwrap().first().and_then(|a| a.address()), Some("gatehouse@example.com"));
        assert!(parsed.header(HeaderName::Other("X-Gatehouse-Tool-Call".into())).is_some());
    }

    #[test]
    fn ascii_subjects_stay_readable() {
        assert_eq!(encode_subject("Meeting Tomorrow"), "Meeting Tomorrow");
        assert!(encode_subject("=?UTF-8?B?x?=").starts_with("=?UTF-8?B?"), "text that looks encoded is encoded");
    }

    #[test]
    fn ascii_bodies_are_7bit_with_crlf() {
        let sender = Address::parse("g@example.com").unwrap();
        let message = Message::build(
            &sender,
            &email(json!({"to": "a@x.com", "subject": "s", "body": "one\ntwo"})),
            "tc_000000000001",
            0,
        );
        let raw = String::from_utf8(message.raw).unwrap();
        assert!(raw.contains("Content-Transfer-Encoding: 7bit\r\n"));
        assert!(raw.ends_with("\r\n\r\none\r\ntwo"));
    }
}
