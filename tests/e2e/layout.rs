//! The README's "Layout" lists every crate and component of the workspace, from the bottom up,
//! and no crate depends on one listed below it. Checked against `cargo metadata`, so a new
//! crate, or a dependency that runs back up, fails here rather than in a reader's head.
//!
//! Every relative link of the README and of docs/*.md leads to a file that exists, and an
//! `#anchor` to a heading of that file, so moving a section or renaming a heading cannot leave
//! a reader at a dead end. The README stays a door (at most 200 lines), and no file the
//! repository tracks cites a design document it does not contain.
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
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

/// GitHub's anchor for a heading: lowercased, every character but letters, digits, spaces,
/// hyphens and underscores dropped, spaces turned into hyphens.
fn github_slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    let line = line.trim_start();
    line.starts_with("```") || line.starts_with("~~~")
}

/// The anchors of a Markdown file's headings (outside code blocks); a repeated heading gets
/// `-1`, `-2`, ... as on GitHub.
fn anchors(markdown: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = HashSet::new();
    let mut fenced = false;
    for line in markdown.lines() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        let level = line.chars().take_while(|&c| c == '#').count();
        if fenced || !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let slug = github_slug(line[level..].trim_end_matches(|c: char| c == '#' || c.is_whitespace()));
        let repeats = seen.entry(slug.clone()).or_default();
        anchors.insert(if *repeats == 0 { slug } else { format!("{slug}-{repeats}") });
        *repeats += 1;
    }
    anchors
}

/// The targets of a Markdown file's inline links and images, `[text](target)`, with the line
/// each is on; links in fenced code blocks and in code spans are not links. A link's text may
/// wrap onto the next line; its target may not.
fn link_targets(markdown: &str) -> Vec<(usize, String)> {
    let mut targets = Vec::new();
    let mut fenced = false;
    // Backticks seen earlier in the paragraph: an odd count means a code span is open.
    let mut backticks = 0;
    for (index, line) in markdown.lines().enumerate() {
        if is_fence(line) {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            backticks = 0;
            continue;
        }
        let mut from = 0;
        while let Some(found) = line[from..].find("](") {
            let start = from + found + 2;
            from = start;
            let in_code = (backticks + line[..start].matches('`').count()) % 2 == 1;
            if let Some(end) = line[start..].find(')').filter(|_| !in_code) {
                targets.push((index + 1, line[start..start + end].trim().to_owned()));
            }
        }
        backticks += line.matches('`').count();
    }
    targets
}

#[test]
fn every_relative_link_in_the_readme_and_docs_resolves() {
    let root = workspace_root().canonicalize().expect("the workspace root");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);

    let mut failures = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a Markdown file");
        let shown = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        for (line, target) in link_targets(&text) {
            if ["http:", "https:", "mailto:"].iter().any(|scheme| target.starts_with(scheme)) {
                continue;
            }
            checked += 1;
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() { file.clone() } else { file.parent().expect("a folder").join(path) };
            if !resolved.exists() {
                failures.push(format!("{shown}:{line}: ({target}): no file or folder {path}"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if resolved.extension().is_none_or(|ext| ext != "md") {
                failures.push(format!("{shown}:{line}: ({target}): an anchor into a file that is not Markdown"));
                continue;
            }
            let headings = std::fs::read_to_string(&resolved).expect("the linked Markdown file");
            if !anchors(&headings).contains(anchor) {
                failures.push(format!("{shown}:{line}: ({target}): {path} has no heading whose anchor is #{anchor}"));
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links were found; is the link scanner reading the files?");
    assert!(failures.is_empty(), "broken links in the README and docs/:\n{}", failures.join("\n"));
}

#[test]
fn github_slugs_and_link_targets_are_read_as_github_reads_them() {
    assert_eq!(github_slug("The `validate` row written with the call"), "the-validate-row-written-with-the-call");
    assert_eq!(
        github_slug("2026-11-24: issue 19's starting point (quiet machine)"),
        "2026-11-24-issue-19s-starting-point-quiet-machine"
    );
    assert_eq!(github_slug("Email (`send_email`)"), "email-send_email");
    let markdown =
        "# Title\n\nSee [a](a.md#x) and `[b](not-a-link)`, then [wrapped\ntext](c.md).\n\n```\n[d](in-a-block)\n```\n";
    assert_eq!(link_targets(markdown), vec![(3, "a.md#x".to_owned()), (4, "c.md".to_owned())]);
    assert!(anchors("# Title\n## Part\n## Part\n").is_superset(&HashSet::from([
        "title".into(),
        "part".into(),
        "part-1".into()
    ])));
}

#[test]
fn the_readme_is_a_door_and_the_design_is_cited_from_inside_the_repository() {
    let root = workspace_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines; a topic that needs more belongs in docs/");

    let listed = Command::new("git").arg("ls-files").current_dir(&root).output().expect("git ls-files runs");
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    // Spelled in two halves so that this file does not find itself.
    let outside = ["SP", "EC §"].concat();
    let outside_file = ["SP", "EC.md"].concat();
    let mut citing = Vec::new();
    let mut read = 0;
    for file in String::from_utf8_lossy(&listed.stdout).lines() {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else { continue };
        read += 1;
        if text.contains(&outside) || text.contains(&outside_file) {
            citing.push(file.to_owned());
        }
    }
    assert!(read > 100, "only {read} tracked text files were read");
    assert!(
        citing.is_empty(),
        "these files cite a document outside the repository; cite docs/architecture.md: {citing:?}"
    );
}

/// The units of compilation Cargo plans for `cargo ARGS` (its unit graph: a package's target,
/// mode, features and profile, with the units it depends on), each named with everything below
/// it, so two builds share a unit exactly when its name is in both. Planned, not compiled: Cargo
/// prints the graph in under a second. `--unit-graph` is unstable; `RUSTC_BOOTSTRAP` lets the
/// stable toolchain print it.
fn planned_units(root: &Path, args: &[&str]) -> Vec<(String, String)> {
    let output = Command::new(env!("CARGO"))
        .args(args)
        .args(["--release", "--locked", "--offline", "-Z", "unstable-options", "--unit-graph"])
        .env("RUSTC_BOOTSTRAP", "1")
        .current_dir(root)
        .output()
        .expect("cargo runs");
    assert!(output.status.success(), "cargo {args:?} --unit-graph: {}", String::from_utf8_lossy(&output.stderr));
    let graph: Value = serde_json::from_slice(&output.stdout).expect("the unit graph's JSON");
    let units = graph["units"].as_array().expect("units");
    // A unit's own description, and its full name: the description with its dependencies' names.
    let own: Vec<String> = units
        .iter()
        .map(|unit| {
            let package = unit["pkg_id"].as_str().unwrap_or_default().rsplit('#').next().unwrap_or_default();
            format!("{package} {} {} {} {}", unit["target"]["name"], unit["mode"], unit["features"], unit["profile"])
        })
        .collect();
    let mut full: Vec<Option<String>> = vec![None; units.len()];
    fn name(index: usize, units: &[Value], own: &[String], full: &mut Vec<Option<String>>) -> String {
        if let Some(done) = &full[index] {
            return done.clone();
        }
        let mut below: Vec<String> = units[index]["dependencies"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|dependency| name(dependency["index"].as_u64().unwrap_or_default() as usize, units, own, full))
            .collect();
        below.sort();
        let named = format!("{}[{}]", own[index], below.join(","));
        full[index] = Some(named.clone());
        named
    }
    (0..units.len()).map(|index| (own[index].clone(), name(index, units, &own, &mut full))).collect()
}

/// The runner alone (`scripts/up`: `cargo build -p gatehouse`) and the workspace's test build
/// (`scripts/test`) plan the same units for the runner's tree, so a run compiles its
/// dependencies once (docs/development.md, "One feature set"; the workspace's own crates are
/// compiled again for the tests, through clippy's driver: "Lints"). A dependency that turns on another feature somewhere
/// in the workspace fails here, naming the crates whose features now differ: add them to
/// crates/build-features.
#[test]
fn the_runner_alone_and_the_whole_workspace_build_its_tree_with_one_feature_set() {
    let root = workspace_root().canonicalize().expect("the workspace root");
    let runner = planned_units(&root, &["build", "-p", "gatehouse"]);
    let workspace = planned_units(&root, &["test", "--no-run", "--workspace", "--exclude", "*-wasmtime4[0-9]"]);
    assert!(runner.len() > 100, "only {} units in the runner's build", runner.len());
    let in_workspace: HashSet<&str> = workspace.iter().map(|(_, full)| full.as_str()).collect();
    let described: HashSet<&str> = workspace.iter().map(|(own, _)| own.as_str()).collect();
    // The runner's own binary is built by the runner alone: the end-to-end tests run that one.
    let missing: Vec<&(String, String)> = runner
        .iter()
        .filter(|(own, full)| !in_workspace.contains(full.as_str()) && !own.starts_with("gatehouse@"))
        .collect();
    // The roots of the difference: units whose own features differ, not those above them.
    let mut roots: Vec<&str> =
        missing.iter().filter(|(own, _)| !described.contains(own.as_str())).map(|(own, _)| own.as_str()).collect();
    roots.sort();
    assert!(
        missing.is_empty(),
        "{} of the runner's {} units are built differently by the workspace's tests; these differ \
         in their own features (add what the workspace turns on to crates/build-features):\n{}",
        missing.len(),
        runner.len(),
        roots.join("\n")
    );
}
