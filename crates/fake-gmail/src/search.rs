//! The part of Gmail's search language `messages.list?q=` understands here: `rfc822msgid:`,
//! `in:`/`label:`/`is:`, `from:`/`to:`/`cc:`/`bcc:`/`subject:`, bare words, `-` negation; all
//! terms must match.
use crate::headers::{self, HeaderBlock};
use crate::mailbox::StoredMessage;

#[derive(Debug, PartialEq, Eq)]
enum Term {
    MessageId(String),
    Label(String),
    Anywhere,
    HeaderContains(&'static str, String),
    Text(String),
    Not(Box<Term>),
}

#[derive(Debug, Default)]
pub(crate) struct Query {
    terms: Vec<Term>,
}

impl Query {
    pub fn parse(q: &str) -> Query {
        Query { terms: tokens(q).into_iter().map(|token| term(&token)).collect() }
    }

    pub fn matches(&self, message: &StoredMessage) -> bool {
        let headers = message.headers();
        self.terms.iter().all(|term| term_matches(term, message, &headers))
    }
}

fn term(token: &str) -> Term {
    if let Some(rest) = token.strip_prefix('-').filter(|rest| !rest.is_empty()) {
        return Term::Not(Box::new(term(rest)));
    }
    let Some((operator, value)) = token.split_once(':') else { return Term::Text(unquote(token).to_lowercase()) };
    let value = unquote(value);
    match operator.to_ascii_lowercase().as_str() {
        "rfc822msgid" => Term::MessageId(headers::bare_message_id(value).to_owned()),
        "in" | "label" | "is" => match value.to_ascii_lowercase().as_str() {
            "anywhere" => Term::Anywhere,
            "draft" | "drafts" => Term::Label("DRAFT".into()),
            other => Term::Label(other.to_ascii_uppercase()),
        },
        "from" => Term::HeaderContains("From", value.to_lowercase()),
        "to" => Term::HeaderContains("To", value.to_lowercase()),
        "cc" => Term::HeaderContains("Cc", value.to_lowercase()),
        "bcc" => Term::HeaderContains("Bcc", value.to_lowercase()),
        "subject" => Term::HeaderContains("Subject", value.to_lowercase()),
        _ => Term::Text(unquote(token).to_lowercase()),
    }
}

fn term_matches(term: &Term, message: &StoredMessage, headers: &HeaderBlock) -> bool {
    match term {
        Term::MessageId(wanted) => message
            .message_id_header
            .as_deref()
            .is_some_and(|id| headers::bare_message_id(id).eq_ignore_ascii_case(wanted)),
        Term::Label(label) => message.has_label(label),
        Term::Anywhere => true,
        Term::HeaderContains(name, wanted) => headers
            .get(name)
            .is_some_and(|value| headers::decode_encoded_words(value).to_lowercase().contains(wanted.as_str())),
        Term::Text(wanted) => String::from_utf8_lossy(&message.raw).to_lowercase().contains(wanted.as_str()),
        Term::Not(inner) => !term_matches(inner, message, headers),
    }
}

/// Splits on whitespace outside double quotes.
fn tokens(q: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut current = String::new();
    let mut in_quotes = false;
    for c in q.chars() {
        match c {
            '"' => {
                in_quotes = !in_quotes;
                current.push(c);
            }
            c if c.is_whitespace() && !in_quotes => {
                if !current.is_empty() {
                    tokens.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        tokens.push(current);
    }
    tokens
}

fn unquote(value: &str) -> &str {
    value.strip_prefix('"').and_then(|v| v.strip_suffix('"')).unwrap_or(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(label: &str, raw: &str) -> StoredMessage {
        StoredMessage {
            id: "18c0ffee00000001".into(),
            thread_id: "18c0ffee00000001".into(),
            label_ids: vec![label.into()],
            raw: raw.as_bytes().to_vec(),
            message_id_header: HeaderBlock::parse(raw.as_bytes()).message_id(),
            delivered: raw.as_bytes().to_vec(),
            bcc: Vec::new(),
            created_at_ms: 0,
        }
    }

    #[test]
    fn finds_by_message_id_with_or_without_brackets_and_by_label() {
        let sent = message("SENT", "Message-ID: <abc@gatehouse>\r\nSubject: =?UTF-8?B?Q2Fmw6k=?=\r\n\r\nhello");
        assert!(Query::parse("rfc822msgid:<abc@gatehouse>").matches(&sent));
        assert!(Query::parse("rfc822msgid:abc@gatehouse in:sent").matches(&sent));
        assert!(!Query::parse("rfc822msgid:abc@gatehouse in:drafts").matches(&sent));
        assert!(!Query::parse("rfc822msgid:other@gatehouse").matches(&sent));
        assert!(Query::parse("subject:café -label:draft HELLO").matches(&sent));
        assert!(Query::parse("").matches(&sent));
    }
}
