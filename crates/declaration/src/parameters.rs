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

/// The sentences of sdk/schema-problems.json, the one source the SDKs' are generated from
/// (sdk/generate-contract-types), so a refusal reads the same in every language.
const PROBLEMS: &str = include_str!("../../../sdk/schema-problems.json");

#[derive(serde::Deserialize)]
struct Problems {
    keywords: std::collections::HashMap<String, String>,
    otherwise: String,
    types: std::collections::HashMap<String, String>,
}

fn problems() -> Option<&'static Problems> {
    static PARSED: std::sync::OnceLock<Option<Problems>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| serde_json::from_str(PROBLEMS).ok()).as_ref()
}

/// The sentence for `keyword`, its `{name}`s filled from `values`.
fn says(keyword: &str, values: &[(&str, String)]) -> String {
    let Some(problems) = problems() else { return "is not valid".to_owned() };
    let Some(template) = problems.keywords.get(keyword) else { return problems.otherwise.clone() };
    values.iter().fold(template.clone(), |said, (name, value)| said.replace(&format!("{{{name}}}"), value))
}

/// One schema error as field problems (an unexpected-properties error names each property).
fn speak(error: &ValidationError<'_>) -> Vec<FieldProblem> {
    let at = error.instance_path().as_str().trim_start_matches('/').replace('/', ".");
    let field = |name: &str| if at.is_empty() { name.to_owned() } else { format!("{at}.{name}") };
    let here = if at.is_empty() { "parameters".to_owned() } else { at.clone() };
    let limit = |keyword: &str, limit: &Value| says(keyword, &[("limit", limit.to_string())]);
    let problem = match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().unwrap_or_default();
            return vec![FieldProblem::new(field(name), says("required", &[]))];
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => {
            return unexpected
                .iter()
                .map(|name| FieldProblem::new(field(name), says("additionalProperties", &[])))
                .collect();
        }
        ValidationErrorKind::Type { kind } => says("type", &[("expected", type_words(&format!("{kind:?}")))]),
        ValidationErrorKind::Minimum { limit: at_least } => limit("minimum", at_least),
        ValidationErrorKind::Maximum { limit: at_most } => limit("maximum", at_most),
        ValidationErrorKind::ExclusiveMinimum { limit: above } => limit("exclusiveMinimum", above),
        ValidationErrorKind::ExclusiveMaximum { limit: below } => limit("exclusiveMaximum", below),
        ValidationErrorKind::MinLength { limit } => says("minLength", &[("limit", limit.to_string())]),
        ValidationErrorKind::MaxLength { limit } => says("maxLength", &[("limit", limit.to_string())]),
        ValidationErrorKind::MinItems { limit } => says("minItems", &[("limit", limit.to_string())]),
        ValidationErrorKind::MaxItems { limit } => says("maxItems", &[("limit", limit.to_string())]),
        ValidationErrorKind::Enum { options } => says("enum", &[("options", one_of(options))]),
        ValidationErrorKind::Constant { expected_value } => says("const", &[("expected", expected_value.to_string())]),
        ValidationErrorKind::Format { format } => says("format", &[("format", format.to_string())]),
        ValidationErrorKind::Pattern { .. } => says("pattern", &[]),
        _ => says("", &[]),
    };
    vec![FieldProblem::new(here, problem)]
}

fn type_words(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    let Some(problems) = problems() else { return lower };
    ["string", "integer", "number", "boolean", "object", "array", "null"]
        .iter()
        .filter(|name| lower.contains(*name))
        .filter_map(|name| problems.types.get(*name).cloned())
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

#[cfg(test)]
mod tests {
    /// The embedded sentences parse, and each names what the other languages' copies name.
    #[test]
    fn the_one_source_of_sentences_parses() {
        let problems = super::problems().expect("sdk/schema-problems.json parses");
        assert_eq!(problems.keywords.get("minimum").map(String::as_str), Some("must be at least {limit}"));
        assert_eq!(super::says("minimum", &[("limit", "1".to_owned())]), "must be at least 1");
        assert_eq!(super::says("no-such-keyword", &[]), problems.otherwise);
    }
}
