//! The parameters checked against the declaration's JSON Schema, with problems an agent can
//! speak ("party_size must be at least 1"), each naming its field.

use gatehouse_domain::FieldProblem;
use jsonschema::error::ValidationErrorKind;
use jsonschema::{ValidationError, Validator};
use serde_json::{Map, Value};

/// The most problems one answer lists; the rest are the same mistakes again.
const MAX_PROBLEMS: usize = 20;

/// The schema compiled once, with `format` checked (2020-12 only annotates it by default).
pub(crate) fn validator(schema: &Value) -> Result<Validator, String> {
    jsonschema::draft202012::options().should_validate_formats(true).build(schema).map_err(|e| e.to_string())
}

pub(crate) fn validate(
    validator: &Validator,
    parameters: Map<String, Value>,
) -> Result<Map<String, Value>, Vec<FieldProblem>> {
    let instance = Value::Object(parameters);
    let problems: Vec<FieldProblem> =
        validator.iter_errors(&instance).take(MAX_PROBLEMS).flat_map(|e| speak(&e)).collect();
    match instance {
        Value::Object(parameters) if problems.is_empty() => Ok(parameters),
        _ => Err(problems),
    }
}

/// One schema error as field problems (an unexpected-properties error names each property).
fn speak(error: &ValidationError<'_>) -> Vec<FieldProblem> {
    let at = error.instance_path().as_str().trim_start_matches('/').replace('/', ".");
    let field = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") };
    let here = if at.is_empty() { "parameters".to_owned() } else { at.clone() };
    let problem = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            return vec![FieldProblem::new(field(name), "is needed")];
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            return unexpected
                .iter()
                .map(|name| FieldProblem::new(field(name), "is not something this tool takes"))
                .collect();
        }
        ValidationErrorKind::Type { kind } => format!("must be {}", type_words(&format!("{kind:?}"))),
        ValidationErrorKind::Minimum { limit } => format!("must be at least {limit}"),
        ValidationErrorKind::Maximum { limit } => format!("must be at most {limit}"),
        ValidationErrorKind::ExclusiveMinimum { limit } => format!("must be more than {limit}"),
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("must be less than {limit}"),
        ValidationErrorKind::MinLength { limit } => format!("must be at least {limit} characters"),
        ValidationErrorKind::MaxLength { limit } => format!("must be at most {limit} characters"),
        ValidationErrorKind::MinItems { limit } => format!("needs at least {limit} items"),
        ValidationErrorKind::MaxItems { limit } => format!("takes at most {limit} items"),
        ValidationErrorKind::Enum { options } => format!("must be one of {}", one_of(options)),
        ValidationErrorKind::Constant { expected_value } => format!("must be {expected_value}"),
        ValidationErrorKind::Format { format } => format!("must be a valid {format}"),
        ValidationErrorKind::Pattern { .. } => "is not in the form this tool expects".to_owned(),
        _ => error.to_string(),
    };
    vec![FieldProblem::new(here, problem)]
}

fn type_words(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    ["string", "integer", "number", "boolean", "object", "array", "null"]
        .iter()
        .filter(|name| lower.contains(*name))
        .map(|name| match *name {
            "integer" => "a whole number",
            "number" => "a number",
            "string" => "text",
            "boolean" => "true or false",
            "object" => "an object",
            "array" => "a list",
            _ => "null",
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

fn one_of(options: &Value) -> String {
    let words: Vec<String> = options
        .as_array()
        .map(|items| items.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)).collect())
        .unwrap_or_default();
    words.join(", ")
}
