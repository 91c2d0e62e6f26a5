//! The JSON Schema (2020-12) of the parameters, as `describe` publishes it to agents and MCP
//! clients. `query::validate` is the authority; this tells a model what to write.

use serde_json::{Value, json};

use crate::query::{DEFAULT_TOP_K, MAX_TOP_K};

pub fn parameters_schema() -> Value {
    let field_name = json!({"type": "string", "pattern": "^[A-Za-z0-9_-]{1,100}$"});
    json!({
        "type": "object",
        "required": ["user_query"],
        "additionalProperties": false,
        "properties": {
            "user_query": {
                "type": "string", "minLength": 1, "maxLength": 1000,
                "description": "What the caller asked for, in their words."
            },
            "structured_query": {
                "type": "object",
                "additionalProperties": false,
                "properties": {
                    "semantic_query": {
                        "type": "string", "minLength": 1, "maxLength": 1000,
                        "description": "The text to search by meaning; defaults to user_query."
                    },
                    "filters": {
                        "type": "object",
                        "description": "Conditions every document must meet. Any key other than date_start, date_end and region must equal the document's metadata value.",
                        "properties": {
                            "date_start": {"type": "string", "format": "date", "description": "Earliest doc_date, YYYY-MM-DD, inclusive."},
                            "date_end": {"type": "string", "format": "date", "description": "Latest doc_date, YYYY-MM-DD, inclusive."},
                            "region": {
                                "description": "One region or several, e.g. Northwest.",
                                "oneOf": [
                                    {"type": "string", "minLength": 1},
                                    {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1, "maxItems": 20}
                                ]
                            }
                        },
                        "propertyNames": field_name,
                        "additionalProperties": {"type": ["string", "number", "boolean"]}
                    },
                    "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K, "default": DEFAULT_TOP_K},
                    "aggregate": {
                        "type": "array", "items": field_name, "maxItems": 10,
                        "description": "Numeric metadata fields to total over every document the filters match, e.g. [\"revenue\", \"units\"]."
                    }
                }
            }
        },
        "examples": [{"user_query": "quarterly sales in the Northwest", "structured_query": {"filters": {"region": "Northwest"}, "top_k": 3}}]
    })
}
