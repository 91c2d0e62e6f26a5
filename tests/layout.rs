//! The README's "Layout" lists every crate and component of the workspace, from the bottom up,
//! and no crate depends on one listed below it. Checked against `cargo metadata`, so a new
//! crate, or a dependency that runs back up, fails here rather than in a reader's head.
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use gatehouse_tests::workspace_root;
use serde_json::Value;

/// The layout's entries in order: `crates/domain`, ..., and `components` for every component.
fn layout_order(readme: &str) -> Vec<String> {
    let section = readme.split("## Layout").nth(1).expect("the README has a Layout section");
    let block = section.split("```").nth(1).expect("the Layout section has a code block");
    block
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|first| first.starts_with("crates/") || first.starts_with("components/"))
        .map(|entry| if entry.starts_with("components/") { "components".to_owned() } else { entry.to_owned() })
        .collect()
}

/// Where a workspace package sits in the layout: its `crates/<dir>`, or `components`.
fn layout_entry(manifest_path: &str, root: &Path) -> Option<String> {
    let dir = Path::new(manifest_path).parent()?.strip_prefix(root).ok()?;
    let mut parts = dir.components().map(|c| c.as_os_str().to_string_lossy().into_owned());
    match (parts.next()?.as_str(), parts.next()) {
        ("crates", Some(name)) => Some(format!("crates/{name}")),
        ("components", Some(_)) => Some("components".to_owned()),
        _ => None,
    }
}

#[test]
fn the_layout_is_complete_and_every_dependency_points_down() {
    let root = workspace_root().canonicalize().expect("the workspace root");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let order = layout_order(&readme);
    let rank: HashMap<&str, usize> = order.iter().enumerate().map(|(i, entry)| (entry.as_str(), i)).collect();

    let output = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(&root)
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: Value = serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");

    let mut entry_of = HashMap::new();
    for package in packages {
        let name = package["name"].as_str().expect("a name");
        if let Some(entry) = layout_entry(package["manifest_path"].as_str().expect("a manifest path"), &root) {
            assert!(rank.contains_key(entry.as_str()), "{entry} ({name}) is missing from the README's Layout");
            entry_of.insert(name.to_owned(), entry);
        }
    }
    let mut checked = 0;
    for package in packages {
        let Some(entry) = entry_of.get(package["name"].as_str().unwrap_or_default()) else { continue };
        for dependency in package["dependencies"].as_array().expect("dependencies") {
            let normal = dependency["kind"].is_null();
            let Some(target) = entry_of.get(dependency["name"].as_str().unwrap_or_default()) else { continue };
            if !normal || target == entry {
                continue;
            }
            assert!(
                rank[target.as_str()] < rank[entry.as_str()],
                "{entry} depends on {target}, listed after it in the README's Layout: a dependency that runs back up"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 20,
        "only {checked} workspace dependencies were found; is cargo metadata reading this workspace?"
    );
}
