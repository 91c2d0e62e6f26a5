//! Output schemas: each tool's answer is described by the OpenAPI document's schema for the
//! same answer on the REST route (built into `$defs` by `build.rs`), plus `Error` for refusals.

use serde_json::{Map, Value, json};

/// `components.schemas` of `openapi/gatehouse.yaml`, with references rewritten to `#/$defs/`.
const DEFINITIONS: &str = include_str!(concat!(env!("OUT_DIR"), "/schemas.json"));

/// The schemas the tools' answers are drawn from.
pub struct Definitions(Map<String, Value>);

impl Definitions {
    pub fn load() -> Definitions {
        match serde_json::from_str(DEFINITIONS) {
            Ok(Value::Object(definitions)) => Definitions(definitions),
            _ => Definitions(Map::new()),
        }
    }

    /// A tool's `outputSchema`: any one of `answers`, or an `Error`, with every definition
    /// they reach and no other.
    pub fn output_schema(&self, answers: &[&str]) -> Value {
        let mut names: Vec<&str> = answers.to_vec();
        names.push("Error");
        let mut defs = Map::new();
        for name in &names {
            self.collect(name, &mut defs);
        }
        let any_of: Vec<Value> = names.iter().map(|name| json!({"$ref": format!("#/$defs/{name}")})).collect();
        json!({"type": "object", "anyOf": any_of, "$defs": defs})
    }

    fn collect(&self, name: &str, defs: &mut Map<String, Value>) {
        if defs.contains_key(name) {
            return;
        }
        let Some(schema) = self.0.get(name) else { return };
        defs.insert(name.to_owned(), schema.clone());
        let mut referenced = Vec::new();
        references(schema, &mut referenced);
        for reference in referenced {
            self.collect(&reference, defs);
        }
    }
}

/// The definition names a schema refers to.
fn references(schema: &Value, found: &mut Vec<String>) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value.as_str().and_then(|r| r.strip_prefix("#/$defs/"))) {
                    ("$ref", Some(name)) => found.push(name.to_owned()),
                    _ => references(value, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| references(item, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_schema_carries_what_it_reaches() {
        let schema = Definitions::load().output_schema(&["ToolCall"]);
        let defs = schema["$defs"].as_object().expect("$defs");
        for name in ["ToolCall", "Error", "ToolCallId", "Status", "ErrorCode"] {
            assert!(defs.contains_key(name), "{name} missing from {defs:?}");
        }
        assert!(!defs.contains_key("SweepReport"));
        let mut dangling = Vec::new();
        references(&schema, &mut dangling);
        assert!(dangling.iter().all(|name| defs.contains_key(name)), "{dangling:?}");
    }
}
