//! The tools' output schemas are the REST answers' schemas: this turns the OpenAPI document's
//! `components.schemas` into one JSON object of JSON Schema 2020-12 definitions (`$defs`),
//! so the MCP tool list and the REST description cannot drift apart.

use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let source = manifest.join("../../openapi/gatehouse.yaml");
    println!("cargo:rerun-if-changed={}", source.display());
    let text = std::fs::read_to_string(&source).expect("reading openapi/gatehouse.yaml");
    let document: serde_json::Value = serde_yaml::from_str(&text).expect("openapi/gatehouse.yaml is valid YAML");
    let schemas = document.pointer("/components/schemas").expect("the OpenAPI document has components.schemas");
    let json = serde_json::to_string(schemas).expect("schemas serialize").replace("#/components/schemas/", "#/$defs/");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("schemas.json");
    std::fs::write(out, json).expect("writing schemas.json");
}
