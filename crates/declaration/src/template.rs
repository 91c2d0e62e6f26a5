//! Templates in a declaration: `{{ parameters.date }}`, `{{ response.confirmation }}`.
//!
//! One engine (minijinja, strict about undefined values) renders three kinds of template: text
//! (sentences and headers), paths (every value percent-encoded, so a parameter cannot add a path
//! segment or a query) and JSON (a string that is exactly one `{{ expression }}` keeps the
//! value's type). Before a declaration is used, [`variables`] lists what each template reads so
//! that a name that does not exist is refused at start rather than on a call.

use std::collections::BTreeSet;

use minijinja::{Environment, Error, ErrorKind, UndefinedBehavior, Value as Scope};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value};

/// Everything but RFC 3986's unreserved characters is encoded in a path value.
const PATH_VALUE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// A template failed to compile or to render; the text says where and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl From<Error> for TemplateError {
    fn from(error: Error) -> TemplateError {
        // The kind's own words first ("undefined value"), then minijinja's detail.
        let detail = error.detail().map(|d| format!(": {d}")).unwrap_or_default();
        TemplateError(format!("{}{detail}", error.kind()))
    }
}

fn text_engine() -> Environment<'static> {
    let mut engine = Environment::new();
    engine.set_undefined_behavior(UndefinedBehavior::Strict);
    engine
}

fn path_engine() -> Environment<'static> {
    let mut engine = text_engine();
    engine.set_formatter(|out, _state, value| {
        if value.is_undefined() {
            return Err(Error::new(ErrorKind::UndefinedError, "a value in the path is undefined"));
        }
        let text = value.to_string();
        write!(out, "{}", utf8_percent_encode(&text, PATH_VALUE))
            .map_err(|_| Error::new(ErrorKind::WriteFailure, "writing the path"))
    });
    engine
}

/// The values a template may read, as one JSON object (`{"parameters": {...}, ...}`).
pub fn scope(values: &Map<String, Value>) -> Scope {
    Scope::from_serialize(values)
}

/// A sentence or a header value.
pub fn render_text(template: &str, values: &Scope) -> Result<String, TemplateError> {
    Ok(text_engine().render_str(template, values)?)
}

/// A path: the template's own text as written, each value percent-encoded.
pub fn render_path(template: &str, values: &Scope) -> Result<String, TemplateError> {
    Ok(path_engine().render_str(template, values)?)
}

/// A JSON template: objects and arrays are walked, strings rendered; a string that is exactly
/// one expression becomes that expression's value, whatever its type.
pub fn render_json(template: &Value, values: &Scope) -> Result<Value, TemplateError> {
    match template {
        Value::String(text) => match sole_expression(text) {
            Some(expression) => {
                let engine = text_engine();
                let value = engine.compile_expression(expression)?.eval(values)?;
                if value.is_undefined() {
                    return Err(TemplateError(format!("undefined value: {expression}")));
                }
                serde_json::to_value(&value).map_err(|e| TemplateError(format!("{expression}: {e}")))
            }
            None => Ok(Value::String(render_text(text, values)?)),
        },
        Value::Array(items) => {
            items.iter().map(|item| render_json(item, values)).collect::<Result<_, _>>().map(Value::Array)
        }
        Value::Object(fields) => fields
            .iter()
            .map(|(key, item)| Ok((key.clone(), render_json(item, values)?)))
            .collect::<Result<Map<_, _>, TemplateError>>()
            .map(Value::Object),
        other => Ok(other.clone()),
    }
}

/// `{{ expression }}` and nothing else around it.
fn sole_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

/// What a text or path template reads, as dotted names (`parameters.date`); refused if it
/// does not compile.
pub fn variables(template: &str) -> Result<BTreeSet<String>, TemplateError> {
    let engine = text_engine();
    let compiled = engine.template_from_str(template)?;
    Ok(compiled.undeclared_variables(true).into_iter().collect())
}

/// What a JSON template reads, with the path of each string inside it (`body.party_size`).
pub fn json_variables(template: &Value, at: &str) -> Vec<(String, Result<BTreeSet<String>, TemplateError>)> {
    let mut found = Vec::new();
    collect_json_variables(template, at, &mut found);
    found
}

fn collect_json_variables(
    template: &Value,
    at: &str,
    found: &mut Vec<(String, Result<BTreeSet<String>, TemplateError>)>,
) {
    match template {
        Value::String(text) => {
            let names = match sole_expression(text) {
                Some(expression) => text_engine()
                    .compile_expression(expression)
                    .map(|compiled| compiled.undeclared_variables(true).into_iter().collect())
                    .map_err(TemplateError::from),
                None => variables(text),
            };
            found.push((at.to_owned(), names));
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                collect_json_variables(item, &format!("{at}[{index}]"), found);
            }
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                collect_json_variables(item, &format!("{at}.{key}"), found);
            }
        }
        _ => {}
    }
}

/// The text of a template with its expressions taken out: what is written literally.
pub fn literal_text(template: &str) -> String {
    let mut literal = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        literal.push_str(&rest[..start]);
        rest = rest[start..].find("}}").map_or("", |end| &rest[start + end + 2..]);
    }
    literal.push_str(rest);
    literal
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn values() -> Scope {
        let Value::Object(map) =
            json!({"parameters": {"party_size": 4, "name": "Ada / Lovelace?", "date": "2026-12-01"}})
        else {
            unreachable!()
        };
        scope(&map)
    }

    #[test]
    fn text_paths_and_json_render_as_their_kind_requires() {
        let values = values();
        assert_eq!(
            render_text("A table for {{ parameters.party_size }}", &values).ok(),
            Some("A table for 4".to_owned())
        );
        assert_eq!(
            render_path("/holds/{{ parameters.name }}", &values).ok(),
            Some("/holds/Ada%20%2F%20Lovelace%3F".to_owned())
        );
        let body =
            render_json(&json!({"size": "{{ parameters.party_size }}", "who": "for {{ parameters.name }}"}), &values);
        assert_eq!(body.ok(), Some(json!({"size": 4, "who": "for Ada / Lovelace?"})));
    }

    #[test]
    fn an_undefined_value_is_an_error_not_an_empty_string() {
        let values = values();
        assert!(render_text("{{ parameters.missing }}", &values).is_err());
        assert!(render_path("/{{ parameters.missing }}", &values).is_err());
        assert!(render_json(&json!("{{ parameters.missing }}"), &values).is_err());
    }

    #[test]
    fn variables_are_listed_with_their_place() {
        let names = variables("{{ parameters.date }} at {{ vars.base }}").unwrap_or_default();
        assert_eq!(names.into_iter().collect::<Vec<_>>(), ["parameters.date", "vars.base"]);
        let found = json_variables(&json!({"a": ["{{ prepared.id }}"]}), "body");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "body.a[0]");
        assert!(variables("{{ unclosed").is_err());
        assert_eq!(literal_text("Bearer {{ secrets.key }}"), "Bearer ");
    }
}
