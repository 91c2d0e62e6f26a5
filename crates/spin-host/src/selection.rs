//! `--component-id`: one host serves a subset of the application's components, as
//! `spin up --component-id` (Spin 3+) and SpinKube's selective deployments do.
//!
//! Spin refuses a selection in which a component reaches an unselected one through a literal
//! `http://<id>.spin.internal` (or the `*.spin.internal` wildcard), but it cannot check a
//! templated host before the variable is resolved. The runner resolves the templates first, so
//! it checks both: a selected component that may reach `<id>.spin.internal`, where `<id>` is not
//! served on this host, is refused at start-up with a message naming both and the entry. A
//! variable that resolves to the wildcard (`tools_origin`'s default) is let through as Spin lets
//! it through, with a warning: such a component reaches only what this host serves.
use std::collections::BTreeSet;

use crate::manifest::Manifest;
use crate::outbound::CHAINING_SUFFIX;
use crate::variables::{ResolvedVariables, VariableError};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SelectionError {
    #[error("--component-id {id:?}: the application has no such component (it has {known})")]
    Unknown { id: String, known: String },
    #[error(
        "component '{component}' reaches '{target}' by service chaining (allowed_outbound_hosts entry \
         {entry:?} is {resolved:?}), but this host does not serve '{target}': add --component-id {target}, \
         or serve '{target}' on another host and point the variable in that entry at it"
    )]
    MissingChainTarget { component: String, target: String, entry: String, resolved: String },
    #[error(
        "component '{component}' may reach any component by service chaining (allowed_outbound_hosts entry \
         {entry:?} is {resolved:?}), which a selection of components cannot satisfy: list the components it \
         calls, or point the variable in that entry at the host that serves them"
    )]
    Wildcard { component: String, entry: String, resolved: String },
    #[error(transparent)]
    Variable(#[from] VariableError),
}

/// Keeps only the `selected` components and their triggers in `manifest` (all of them when the
/// selection is empty), after checking that every component kept can reach what it chains to.
pub(crate) fn retain_selected(
    manifest: &mut Manifest,
    selected: &[String],
    variables: &ResolvedVariables,
) -> Result<(), SelectionError> {
    if selected.is_empty() {
        return Ok(());
    }
    let selected: BTreeSet<&str> = selected.iter().map(String::as_str).collect();
    for id in &selected {
        if !manifest.component.contains_key(*id) {
            let known = manifest.component.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
            return Err(SelectionError::Unknown { id: (*id).to_owned(), known });
        }
    }
    for (component, decl) in manifest.component.iter().filter(|(id, _)| selected.contains(id.as_str())) {
        for entry in &decl.allowed_outbound_hosts {
            let resolved = variables.expand(entry)?;
            match chaining_target(&resolved) {
                Some("*") if entry.contains("{{") => crate::log::warn(
                    "a selected component may chain to any component, and reaches only those served here",
                    serde_json::json!({"component": component, "entry": entry, "resolved": resolved}),
                ),
                Some("*") => {
                    return Err(SelectionError::Wildcard {
                        component: component.clone(),
                        entry: entry.clone(),
                        resolved: resolved.clone(),
                    });
                }
                Some(target) if !selected.contains(target) => {
                    return Err(SelectionError::MissingChainTarget {
                        component: component.clone(),
                        target: target.to_owned(),
                        entry: entry.clone(),
                        resolved,
                    });
                }
                _ => {}
            }
        }
    }
    manifest.component.retain(|id, _| selected.contains(id.as_str()));
    manifest.trigger.http.retain(|trigger| selected.contains(trigger.component.as_str()));
    Ok(())
}

/// The component an allowed-host entry lets a component chain to: `gmail` for
/// `http://gmail.spin.internal`, `*` for the wildcard, `None` for any other host.
fn chaining_target(entry: &str) -> Option<&str> {
    let after_scheme = entry.split_once("://").map_or(entry, |(_, rest)| rest);
    let host = after_scheme.split(['/', ':']).next().unwrap_or_default();
    host.strip_suffix(CHAINING_SUFFIX).filter(|target| !target.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variables::VariableSources;

    const MANIFEST: &str = r#"
        spin_manifest_version = 2
        [application]
        name = "selection"
        [variables]
        tool_origin = { default = "http://tool.spin.internal" }
        any_origin = { default = "http://*.spin.internal" }
        [[trigger.http]]
        route = "/edge"
        component = "edge"
        [[trigger.http]]
        route = { private = true }
        component = "tool"
        [[trigger.http]]
        route = "/tool/..."
        component = "tool"
        [component.edge]
        source = "edge.wasm"
        allowed_outbound_hosts = ["postgres://db:5432", "{{ tool_origin }}"]
        [component.tool]
        source = "tool.wasm"
        [component.wild]
        source = "wild.wasm"
        allowed_outbound_hosts = ["http://*.spin.internal"]
        [component.templated]
        source = "templated.wasm"
        allowed_outbound_hosts = ["{{ any_origin }}"]
    "#;

    fn select(ids: &[&str], flags: &[(&str, &str)]) -> Result<Manifest, SelectionError> {
        let mut manifest = Manifest::parse(MANIFEST)
            .map_err(|e| SelectionError::Unknown { id: e.to_string(), known: String::new() })?;
        let mut sources = VariableSources::default();
        for (name, value) in flags {
            sources.flags.insert((*name).to_owned(), (*value).to_owned());
        }
        let variables = ResolvedVariables::resolve(&manifest, &sources)?;
        let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
        retain_selected(&mut manifest, &ids, &variables)?;
        Ok(manifest)
    }

    #[test]
    fn keeps_the_selected_components_and_their_routes() {
        let kept =
            select(&["tool"], &[]).map(|m| (m.component.keys().cloned().collect::<Vec<_>>(), m.trigger.http.len()));
        assert_eq!(kept, Ok((vec!["tool".to_owned()], 2)));
        assert_eq!(select(&[], &[]).map(|m| m.component.len()), Ok(4), "no selection serves everything");
    }

    #[test]
    fn a_chained_target_must_be_served_here_or_pointed_elsewhere() {
        let refused = select(&["edge"], &[]).err();
        assert!(
            matches!(&refused, Some(SelectionError::MissingChainTarget { component, target, .. }) if component == "edge" && target == "tool"),
            "{refused:?}"
        );
        let message = refused.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("{{ tool_origin }}") && message.contains("--component-id tool"), "{message}");
        assert!(select(&["edge", "tool"], &[]).is_ok());
        assert!(select(&["edge"], &[("tool_origin", "https://tools.example.com")]).is_ok());
        assert!(matches!(select(&["wild", "tool"], &[]), Err(SelectionError::Wildcard { .. })));
        // As under Spin, which cannot see through the template: let through (with a warning).
        assert!(select(&["templated"], &[]).is_ok());
        assert!(matches!(select(&["nope"], &[]), Err(SelectionError::Unknown { .. })));
    }

    #[test]
    fn finds_chaining_targets() {
        assert_eq!(chaining_target("http://gmail.spin.internal"), Some("gmail"));
        assert_eq!(chaining_target("http://gmail.spin.internal:80"), Some("gmail"));
        assert_eq!(chaining_target("http://*.spin.internal"), Some("*"));
        assert_eq!(chaining_target("https://tools.example.com"), None);
        assert_eq!(chaining_target("postgres://db:5432"), None);
    }
}
