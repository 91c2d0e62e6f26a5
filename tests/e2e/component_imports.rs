//! The built components may import only WASI 0.2 and the three Spin interfaces below, so they
//! run unchanged on Spin 3.x and 4.x (docs/architecture.md, "The runner and real Spin"). Checked
//! on the real `.wasm` files of spin.toml, and on the tools sdk/test renders from the templates
//! and builds.
use gatehouse_tests::workspace_root;
use wasmparser::{Parser, Payload};

const SPIN_INTERFACES: &[&str] =
    &["spin:postgres/postgres@4.0.0", "fermyon:spin/variables@2.0.0", "fermyon:spin/llm@2.0.0"];

fn allowed(import: &str) -> bool {
    SPIN_INTERFACES.contains(&import)
        || (import.starts_with("wasi:") && import.split_once('@').is_some_and(|(_, v)| v.starts_with("0.2.")))
}

/// Top-level imports and exports of a component (nested core modules are not walked).
fn interfaces(wasm: &[u8]) -> (Vec<String>, Vec<String>) {
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.expect("valid wasm") {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    imports.push(import.expect("import").name.name.to_owned());
                }
            }
            Payload::ComponentExportSection(section) if depth == 0 => {
                for export in section {
                    exports.push(export.expect("export").name.name.to_owned());
                }
            }
            _ => {}
        }
    }
    (imports, exports)
}

/// The component at `source` (under the workspace) imports only what Spin provides and serves
/// wasi:http 0.2.
fn runs_on_spin(id: &str, source: &str) {
    let wasm = std::fs::read(workspace_root().join(source))
        .unwrap_or_else(|e| panic!("component {id}: cannot read {source} ({e}); run `gatehouse build` and sdk/test"));
    let (imports, exports) = interfaces(&wasm);
    assert!(!imports.is_empty(), "component {id} imports nothing?");
    let foreign: Vec<_> = imports.iter().filter(|i| !allowed(i)).collect();
    assert!(foreign.is_empty(), "component {id} imports interfaces Spin does not provide: {foreign:?}");
    assert!(
        exports.iter().any(|e| e.starts_with("wasi:http/incoming-handler@0.2.")),
        "component {id} does not export wasi:http/incoming-handler@0.2.x: {exports:?}"
    );
}

#[test]
fn application_components_import_only_wasi_0_2_and_spin_interfaces() {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(workspace_root().join("spin.toml")).expect("spin.toml"))
            .expect("valid toml");
    let components = manifest["component"].as_table().expect("components");
    assert!(!components.is_empty());
    for (id, component) in components {
        runs_on_spin(id, component["source"].as_str().expect("local source"));
    }
}

#[test]
fn tools_built_from_the_templates_import_only_wasi_0_2_and_spin_interfaces() {
    runs_on_spin("order-supplies (templates/tool-python)", "target/sdk/tools/order-supplies/app.wasm");
    runs_on_spin("order-stationery (templates/tool-typescript)", "target/sdk/tools/order-stationery/app.wasm");
    runs_on_spin(
        "order-parts (templates/tool-rust)",
        "target/sdk/tools/order-parts/target/wasm32-wasip2/release/order_parts.wasm",
    );
}

#[test]
fn the_import_rule_rejects_what_spin_lacks() {
    assert!(allowed("wasi:http/types@0.2.6"));
    assert!(allowed("spin:postgres/postgres@4.0.0"));
    assert!(!allowed("wasi:http/types@0.3.0-rc-2026-01-06"));
    assert!(!allowed("spin:postgres/postgres@3.0.0"));
    assert!(!allowed("fermyon:spin/key-value@2.0.0"));
    assert!(!allowed("gatehouse:runner/secret-backdoor@1.0.0"));
}
