//! The parameters of `send_email` (docs/architecture.md, "The Gmail tool"), checked and
//! normalized, with field errors a relay's model can act on.

use gatehouse_domain::FieldProblem;
use serde_json::{Map, Value};

use crate::address::Address;

/// Longest subject accepted; a spoken subject is short, and header lines have limits.
pub const MAX_SUBJECT_CHARS: usize = 250;
/// Largest body accepted, in bytes of UTF-8.
pub const MAX_BODY_BYTES: usize = 32 * 1024;
/// Most recipients over to, cc and bcc together.
pub const MAX_RECIPIENTS: usize = 50;

const KNOWN: [&str; 6] = ["to", "cc", "bcc", "subject", "body", "reference_context"];

/// Checked parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailParameters {
    pub to: Vec<Address>,
    pub cc: Vec<Address>,
    pub bcc: Vec<Address>,
    pub subject: String,
    pub body: String,
    pub reference_context: Option<String>,
}

impl EmailParameters {
    /// Checks everything and reports every problem at once. On success, also returns the
    /// parameters normalized in the caller's own shape (a single address stays a string).
    pub fn parse(parameters: &Map<String, Value>) -> Result<(EmailParameters, Map<String, Value>), Vec<FieldProblem>> {
        let mut problems = Vec::new();
        let mut normalized = parameters.clone();
        for key in parameters.keys().filter(|key| !KNOWN.contains(&key.as_str())) {
            problems.push(FieldProblem::new(key, "is not a parameter of send_email"));
        }
        let to = recipients(parameters, "to", true, &mut normalized, &mut problems);
        let cc = recipients(parameters, "cc", false, &mut normalized, &mut problems);
        let bcc = recipients(parameters, "bcc", false, &mut normalized, &mut problems);
        if to.len() + cc.len() + bcc.len() > MAX_RECIPIENTS {
            problems.push(FieldProblem::new("to", format!("at most {MAX_RECIPIENTS} recipients in all")));
        }
        let subject = subject(parameters, &mut normalized, &mut problems);
        let body = body(parameters, &mut problems);
        let reference_context = reference_context(parameters, &mut problems);
        if !problems.is_empty() {
            return Err(problems);
        }
        let checked = EmailParameters { to, cc, bcc, subject, body, reference_context };
        Ok((checked, normalized))
    }

    pub fn all_recipients(&self) -> impl Iterator<Item = &Address> {
        self.to.iter().chain(&self.cc).chain(&self.bcc)
    }
}

/// "I'll send an email to … about '…'. Confirm to proceed."
pub fn summarize(parameters: &EmailParameters) -> String {
    let mut sentence = format!("I'll send an email to {}", spoken_list(&parameters.to));
    if !parameters.cc.is_empty() {
        sentence.push_str(&format!(", copying {}", spoken_list(&parameters.cc)));
    }
    if !parameters.bcc.is_empty() {
        let n = parameters.bcc.len();
        sentence.push_str(&format!(" and {n} blind {}", if n == 1 { "copy" } else { "copies" }));
    }
    format!("{sentence} about '{}'. Confirm to proceed.", parameters.subject)
}

fn spoken_list(addresses: &[Address]) -> String {
    match addresses {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(Address::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
    }
}

fn recipients(
    parameters: &Map<String, Value>,
    field: &str,
    required: bool,
    normalized: &mut Map<String, Value>,
    problems: &mut Vec<FieldProblem>,
) -> Vec<Address> {
    let (items, single) = match parameters.get(field) {
        None | Some(Value::Null) => {
            if required {
                problems.push(FieldProblem::new(field, "is required: one address or a list of addresses"));
            }
            return Vec::new();
        }
        Some(Value::String(one)) => (vec![Value::String(one.clone())], true),
        Some(Value::Array(many)) => (many.clone(), false),
        Some(_) => {
            problems.push(FieldProblem::new(field, "must be an address or a list of addresses"));
            return Vec::new();
        }
    };
    if required && items.is_empty() {
        problems.push(FieldProblem::new(field, "needs at least one address"));
    }
    let mut addresses = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let name = if single { field.to_owned() } else { format!("{field}[{index}]") };
        match item.as_str().map(Address::parse) {
            Some(Ok(address)) => addresses.push(address),
            Some(Err(problem)) => problems.push(FieldProblem::new(name, problem.to_string())),
            None => problems.push(FieldProblem::new(name, "must be text")),
        }
    }
    let shaped = |a: &Address| Value::String(a.to_string());
    let value = if single {
        addresses.first().map(shaped).unwrap_or(Value::Null)
    } else {
        Value::Array(addresses.iter().map(shaped).collect())
    };
    normalized.insert(field.to_owned(), value);
    addresses
}

fn subject(
    parameters: &Map<String, Value>,
    normalized: &mut Map<String, Value>,
    problems: &mut Vec<FieldProblem>,
) -> String {
    let Some(subject) = parameters.get("subject").and_then(Value::as_str) else {
        problems.push(FieldProblem::new("subject", "is required and must be text"));
        return String::new();
    };
    if subject.contains(['\r', '\n']) {
        problems.push(FieldProblem::new("subject", "must not contain line breaks"));
    } else if subject.chars().any(|c| c.is_control() && c != '\t') {
        problems.push(FieldProblem::new("subject", "must not contain control characters"));
    }
    let subject = subject.trim();
    if subject.is_empty() {
        problems.push(FieldProblem::new("subject", "must not be empty"));
    }
    if subject.chars().count() > MAX_SUBJECT_CHARS {
        problems.push(FieldProblem::new("subject", format!("must be at most {MAX_SUBJECT_CHARS} characters")));
    }
    normalized.insert("subject".into(), Value::String(subject.to_owned()));
    subject.to_owned()
}

fn body(parameters: &Map<String, Value>, problems: &mut Vec<FieldProblem>) -> String {
    match parameters.get("body") {
        Some(Value::String(body)) if body.len() > MAX_BODY_BYTES => {
            problems.push(FieldProblem::new("body", format!("must be at most {MAX_BODY_BYTES} bytes")));
            String::new()
        }
        Some(Value::String(body)) if body.contains('\0') => {
            problems.push(FieldProblem::new("body", "must not contain NUL characters"));
            String::new()
        }
        Some(Value::String(body)) => body.clone(),
        _ => {
            problems.push(FieldProblem::new("body", "is required and must be text"));
            String::new()
        }
    }
}

fn reference_context(parameters: &Map<String, Value>, problems: &mut Vec<FieldProblem>) -> Option<String> {
    match parameters.get("reference_context") {
        None | Some(Value::Null) => None,
        Some(Value::String(key)) if !key.trim().is_empty() && key.len() <= 200 => Some(key.trim().to_owned()),
        Some(_) => {
            problems.push(FieldProblem::new("reference_context", "must be a context key, such as last_query_results"));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(value: Value) -> Result<(EmailParameters, Map<String, Value>), Vec<FieldProblem>> {
        EmailParameters::parse(value.as_object().unwrap())
    }

    fn fields(problems: &[FieldProblem]) -> Vec<&str> {
        problems.iter().map(|p| p.field.as_str()).collect()
    }

    #[test]
    fn keeps_the_callers_shape_and_normalizes() {
        let (checked, normalized) =
            parse(json!({"to": "John@Gmail.COM", "cc": ["a@X.org"], "subject": " Meeting ", "body": "Hi"})).unwrap();
        assert_eq!(normalized["to"], json!("John@gmail.com"));
        assert_eq!(normalized["cc"], json!(["a@x.org"]));
        assert_eq!(normalized["subject"], json!("Meeting"));
        assert_eq!(
            summarize(&checked),
            "I'll send an email to John@gmail.com, copying a@x.org about 'Meeting'. Confirm to proceed."
        );
    }

    #[test]
    fn reports_every_problem_by_field() {
        let problems = parse(json!({"to": ["ok@x.com", "nope"], "bcc": 3, "subject": "a\r\nBcc: x@y.com", "extra": 1}))
            .unwrap_err();
        assert_eq!(fields(&problems), ["extra", "to[1]", "bcc", "subject", "body"]);
    }

    #[test]
    fn header_injection_through_an_address_is_refused() {
        let problems = parse(json!({"to": "a@x.com\nBcc: b@y.com", "subject": "s", "body": "b"})).unwrap_err();
        assert_eq!(problems[0].problem, "contains a line break");
    }

    #[test]
    fn summary_lists_recipients_as_spoken() {
        let (checked, _) =
            parse(json!({"to": ["a@x.com", "b@x.com", "c@x.com"], "bcc": "d@x.com", "subject": "Q3", "body": ""}))
                .unwrap();
        assert_eq!(
            summarize(&checked),
            "I'll send an email to a@x.com, b@x.com and c@x.com and 1 blind copy about 'Q3'. Confirm to proceed."
        );
    }
}
