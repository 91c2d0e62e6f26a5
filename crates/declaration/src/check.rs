//! A declaration checked before anything starts: every problem found, each naming its field.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::model::{Declaration, HttpMethod, Step};
use crate::template::{self, TemplateError};

/// One thing wrong with a declaration: the field (`execute.headers.authorization`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct Problem {
    pub field: String,
    pub problem: String,
}

impl Problem {
    fn new(field: impl Into<String>, problem: impl Into<String>) -> Problem {
        Problem { field: field.into(), problem: problem.into() }
    }
}

/// The longest a backend request may be given, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 60_000;
const MIN_TIMEOUT_MS: u64 = 100;

/// Headers Gatehouse sets itself on every request to the backend.
pub const RESERVED_HEADERS: [&str; 6] =
    ["host", "content-length", "content-type", "idempotency-key", "x-gatehouse-signature", "transfer-encoding"];

/// Header names whose value is a credential: it must come from `{{ secrets.name }}`, with at
/// most a scheme word written beside it.
const CREDENTIAL_HEADERS: [&str; 5] = ["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"];
const SCHEME_WORDS: [&str; 4] = ["", "Bearer", "Basic", "Token"];

/// Spin variables the platform already gives every component; a declaration cannot take them.
const PLATFORM_VARIABLES: [&str; 4] = ["db_url", "contract_secret", "state_secret", "declaration"];

/// Which template reads what. The roots a template may name, by where it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Confirm,
    Checkpoint,
    /// A request's path or body; `prepared` only after a prepare.
    Request {
        after_prepare: bool,
    },
    /// A request's header: also `secrets`.
    Header {
        after_prepare: bool,
    },
    Answer {
        with_prepare: bool,
    },
}

impl Place {
    fn allows(self, root: &str) -> bool {
        match self {
            Place::Confirm => root == "parameters",
            Place::Checkpoint => matches!(root, "parameters" | "prepared"),
            Place::Request { after_prepare } => {
                matches!(root, "parameters" | "vars" | "call") || (after_prepare && root == "prepared")
            }
            Place::Header { after_prepare } => Place::Request { after_prepare }.allows(root) || root == "secrets",
            Place::Answer { with_prepare } => {
                matches!(root, "parameters" | "response") || (with_prepare && root == "prepared")
            }
        }
    }

    fn roots(self) -> &'static str {
        match self {
            Place::Confirm => "parameters",
            Place::Checkpoint => "parameters, prepared",
            Place::Request { after_prepare: false } => "parameters, vars, call",
            Place::Request { after_prepare: true } => "parameters, prepared, vars, call",
            Place::Header { after_prepare: false } => "parameters, vars, call, secrets",
            Place::Header { after_prepare: true } => "parameters, prepared, vars, call, secrets",
            Place::Answer { with_prepare: false } => "parameters, response",
            Place::Answer { with_prepare: true } => "parameters, prepared, response",
        }
    }
}

/// Every problem of `declaration`; empty when it can be used.
pub(crate) fn problems(declaration: &Declaration) -> Vec<Problem> {
    let mut found = Vec::new();
    check_name("name", &declaration.name, &mut found);
    for (index, alias) in declaration.aliases.iter().enumerate() {
        check_name(&format!("aliases[{index}]"), alias, &mut found);
    }
    if declaration.description.trim().is_empty() || declaration.description.len() > 1024 {
        found.push(Problem::new("description", "must be a sentence of 1 to 1024 characters"));
    }
    let properties = check_schema(&declaration.parameters, &mut found);

    let mut reader = Reader { properties: &properties, found: &mut found };
    reader.text("confirm", &declaration.confirm, Place::Confirm);
    check_backend(declaration, reader.found);

    let with_prepare = declaration.prepare.is_some();
    match (&declaration.prepare, &declaration.discard) {
        (Some(_), None) => {
            reader.found.push(Problem::new("discard", "a tool with a prepare step must say how to undo it"))
        }
        (None, Some(_)) => reader.found.push(Problem::new("discard", "there is no prepare step to undo")),
        _ => {}
    }
    if let Some(prepare) = &declaration.prepare {
        reader.step("prepare", prepare, false);
    }
    match (&declaration.checkpoint, with_prepare) {
        (Some(checkpoint), true) => reader.text("checkpoint", checkpoint, Place::Checkpoint),
        (Some(_), false) => {
            reader.found.push(Problem::new("checkpoint", "only a tool with a prepare step stops at a checkpoint"))
        }
        (None, _) => {}
    }
    reader.step("execute", &declaration.execute, with_prepare);
    if let Some(discard) = &declaration.discard {
        reader.step("discard", discard, with_prepare);
    }
    reader.text("answer.voice_response", &declaration.answer.voice_response, Place::Answer { with_prepare });
    if let Some(result) = &declaration.answer.result {
        reader.json("answer.result", result, Place::Answer { with_prepare });
    }
    found
}

fn check_name(field: &str, name: &str, found: &mut Vec<Problem>) {
    let mut chars = name.chars();
    let starts = chars.next().is_some_and(|c| c.is_ascii_lowercase());
    if !starts || name.len() > 64 || !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        found.push(Problem::new(field, "must be 1 to 64 of a-z, 0-9 and _, starting with a letter"));
    }
}

/// The parameters' property names, for checking the templates that read them.
fn check_schema(schema: &Value, found: &mut Vec<Problem>) -> BTreeSet<String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        found.push(Problem::new(
            "parameters.type",
            "the parameters schema must be an object schema (type = \"object\")",
        ));
    }
    if let Err(error) = jsonschema::draft202012::new(schema) {
        let at = error.instance_path().as_str().replace('/', ".");
        found.push(Problem::new(format!("parameters{at}"), format!("not a valid JSON Schema (2020-12): {error}")));
    }
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default()
}

fn check_backend(declaration: &Declaration, found: &mut Vec<Problem>) {
    let backend = &declaration.backend;
    if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&backend.timeout_ms) {
        found.push(Problem::new("backend.timeout_ms", format!("must be {MIN_TIMEOUT_MS} to {MAX_TIMEOUT_MS}")));
    }
    if let Err(problem) = crate::Origin::parse(&backend.url) {
        found.push(Problem::new("backend.url", problem));
    }
}

/// Checks the templates of one declaration against the names they may read.
struct Reader<'a> {
    properties: &'a BTreeSet<String>,
    found: &'a mut Vec<Problem>,
}

impl Reader<'_> {
    fn text(&mut self, field: &str, template: &str, place: Place) {
        let names = template::variables(template);
        self.names(field, names, place);
    }

    fn json(&mut self, field: &str, template: &Value, place: Place) {
        for (at, names) in template::json_variables(template, field) {
            self.names(&at, names, place);
        }
    }

    fn names(&mut self, field: &str, names: Result<BTreeSet<String>, TemplateError>, place: Place) {
        let names = match names {
            Ok(names) => names,
            Err(error) => return self.found.push(Problem::new(field, format!("not a valid template: {error}"))),
        };
        for name in names {
            let (root, key) = name.split_once('.').unwrap_or((name.as_str(), ""));
            let problem = if !place.allows(root) {
                Some(format!("{{{{ {name} }}}} is not known here; a template here may read {}", place.roots()))
            } else if root == "parameters"
                && !key.is_empty()
                && !self.properties.contains(key.split('.').next().unwrap_or(key))
            {
                Some(format!("{{{{ {name} }}}}: the parameters schema has no property {key:?}"))
            } else if matches!(root, "vars" | "secrets") && !is_variable_name(key) {
                Some(format!("{{{{ {name} }}}}: a Spin variable name is a-z, 0-9 and _, starting with a letter"))
            } else if matches!(root, "vars" | "secrets") && PLATFORM_VARIABLES.contains(&key) {
                Some(format!("{{{{ {name} }}}}: {key} is the platform's own variable"))
            } else if root == "call" && !matches!(key, "tool_call_id" | "session_id") {
                Some(format!("{{{{ {name} }}}}: a call has tool_call_id and session_id"))
            } else {
                None
            };
            if let Some(problem) = problem {
                self.found.push(Problem::new(field, problem));
            }
        }
    }

    fn step(&mut self, field: &str, step: &Step, after_prepare: bool) {
        if !step.path.starts_with('/') {
            self.found.push(Problem::new(format!("{field}.path"), "must start with /"));
        }
        if step.path.contains("://") {
            self.found.push(Problem::new(format!("{field}.path"), "is a path under backend.url, not a URL"));
        }
        self.text(&format!("{field}.path"), &step.path, Place::Request { after_prepare });
        if let Some(body) = &step.body {
            if matches!(step.method, HttpMethod::Get | HttpMethod::Delete) {
                self.found.push(Problem::new(format!("{field}.body"), "a GET or DELETE request has no body"));
            }
            self.json(&format!("{field}.body"), body, Place::Request { after_prepare });
        }
        for (name, value) in &step.headers {
            let at = format!("{field}.headers.{name}");
            let lower = name.to_ascii_lowercase();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) {
                self.found.push(Problem::new(&at, "not a header name"));
            } else if RESERVED_HEADERS.contains(&lower.as_str()) {
                self.found.push(Problem::new(&at, "Gatehouse sets this header itself"));
            }
            let literal = template::literal_text(value);
            let reads_secret =
                template::variables(value).is_ok_and(|names| names.iter().any(|n| n.starts_with("secrets.")));
            if is_credential(&lower) && (!reads_secret || !SCHEME_WORDS.contains(&literal.trim())) {
                self.found.push(Problem::new(
                    &at,
                    "a credential is never written in the declaration: take it from a Spin variable, \
                     as \"Bearer {{ secrets.api_key }}\"",
                ));
            }
            self.text(&at, value, Place::Header { after_prepare });
        }
    }
}

fn is_credential(lower_name: &str) -> bool {
    CREDENTIAL_HEADERS.contains(&lower_name) || ["token", "secret", "key"].iter().any(|word| lower_name.contains(word))
}

pub(crate) fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}
