//! The tool registry: which component implements which function name.
//!
//! It is the application variable `tool_registry`, a comma-separated list of
//! `name[|alias...]=component` entries, e.g. `send_email|send_gmail=gmail,query_vector_db=vector-query`.
//! Adding a tool is one component plus one entry here. A tool deployed on a host of its own is
//! named by the base URL of its contract instead of a component id:
//! `send_email|send_gmail=https://tools.example.com/internal/tools/gmail`.

/// One entry of the registry: a function name, its aliases, and where it is served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// The canonical function name (the first name of the entry).
    pub name: String,
    /// Other names the agent may call it by (`send_gmail` for `send_email`).
    pub aliases: Vec<String>,
    /// Where the tool is served: a component of this application, or a tool host's URL (see
    /// [`ToolTarget`]). Calls store it, so a call keeps its tool if the registry changes.
    pub component: String,
}

/// How a registry entry's `component` is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolTarget<'a> {
    /// A component of this application, by service chaining: `http://<id>.spin.internal`.
    Component(&'a str),
    /// The base URL of the tool's contract on another host, without a trailing slash.
    Url(&'a str),
}

impl<'a> ToolTarget<'a> {
    /// A URL (`http://`, `https://`) is a tool host; anything else a component id.
    pub fn of(component: &'a str) -> ToolTarget<'a> {
        if component.starts_with("http://") || component.starts_with("https://") {
            ToolTarget::Url(component.trim_end_matches('/'))
        } else {
            ToolTarget::Component(component)
        }
    }

    /// Where the tool is, for an operator reading why it could not be reached: the component
    /// id, or the URL's scheme, host and port (never its path, which may carry a token).
    pub fn origin(self) -> String {
        match self {
            ToolTarget::Component(id) => format!("component {id}"),
            ToolTarget::Url(base) => {
                let (scheme, rest) = base.split_once("://").unwrap_or(("", base));
                let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
                // Credentials in the authority (user:password@) are not shown.
                let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
                format!("{scheme}://{host}")
            }
        }
    }

    /// The URL of the contract operation at `path` (`/tool/prepare`).
    pub fn url(self, path: &str) -> String {
        match self {
            ToolTarget::Component(id) => format!("http://{id}.spin.internal{path}"),
            ToolTarget::Url(base) => format!("{base}{path}"),
        }
    }
}

/// The registry: `tool_registry`, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRegistry {
    entries: Vec<RegistryEntry>,
}

impl ToolRegistry {
    /// Parses `tool_registry`; an entry without a name or a component, or a URL without a host,
    /// is refused with the entry quoted.
    pub fn parse(spec: &str) -> Result<ToolRegistry, String> {
        let mut entries = Vec::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (names, component) =
                entry.split_once('=').ok_or_else(|| format!("registry entry {entry:?} has no '=component'"))?;
            let mut names = names.split('|').map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned);
            let name = names.next().ok_or_else(|| format!("registry entry {entry:?} names no function"))?;
            let component = component.trim();
            if component.is_empty() {
                return Err(format!("registry entry {entry:?} names no component"));
            }
            if let ToolTarget::Url(url) = ToolTarget::of(component)
                && url.split_once("://").is_none_or(|(_, rest)| rest.is_empty() || rest.starts_with('/'))
            {
                return Err(format!("registry entry {entry:?} names a URL without a host"));
            }
            entries.push(RegistryEntry { name, aliases: names.collect(), component: component.to_owned() });
        }
        Ok(ToolRegistry { entries })
    }

    /// The entry for a function name or one of its aliases.
    pub fn resolve(&self, function: &str) -> Option<&RegistryEntry> {
        self.entries.iter().find(|e| e.name == function || e.aliases.iter().any(|a| a == function))
    }

    /// Every entry, in the variable's order.
    pub fn entries(&self) -> &[RegistryEntry] {
        &self.entries
    }

    /// Every accepted function name, for error messages.
    pub fn names(&self) -> Vec<&str> {
        self.entries
            .iter()
            .flat_map(|e| std::iter::once(e.name.as_str()).chain(e.aliases.iter().map(String::as_str)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_names_and_aliases() {
        let registry =
            ToolRegistry::parse("send_email|send_gmail=gmail, query_vector_db=vector-query").unwrap_or_default();
        assert_eq!(registry.resolve("send_gmail").map(|e| e.name.as_str()), Some("send_email"));
        assert_eq!(registry.resolve("send_email").map(|e| e.component.as_str()), Some("gmail"));
        assert_eq!(registry.resolve("query_vector_db").map(|e| e.component.as_str()), Some("vector-query"));
        assert_eq!(registry.resolve("gmail"), None);
        assert_eq!(registry.names(), ["send_email", "send_gmail", "query_vector_db"]);
    }

    #[test]
    fn a_tool_may_live_on_another_host() {
        let registry = ToolRegistry::parse("send_email=https://tools.example.com/internal/tools/gmail/, x=fixture")
            .unwrap_or_default();
        let gmail = registry.resolve("send_email").map(|e| ToolTarget::of(&e.component));
        assert_eq!(gmail, Some(ToolTarget::Url("https://tools.example.com/internal/tools/gmail")));
        assert_eq!(
            gmail.map(|t| t.url("/tool/prepare")).as_deref(),
            Some("https://tools.example.com/internal/tools/gmail/tool/prepare")
        );
        let local = registry.resolve("x").map(|e| ToolTarget::of(&e.component));
        assert_eq!(
            local.map(|t| t.url("/tool/describe")).as_deref(),
            Some("http://fixture.spin.internal/tool/describe")
        );
        assert_eq!(gmail.map(ToolTarget::origin).as_deref(), Some("https://tools.example.com"));
        assert_eq!(ToolTarget::of("https://u:p@h:8443/x?token=1").origin(), "https://h:8443");
        assert_eq!(local.map(ToolTarget::origin).as_deref(), Some("component fixture"));
        assert!(ToolRegistry::parse("send_email=https://").is_err());
        assert!(ToolRegistry::parse("send_email=http:///x").is_err());
    }

    #[test]
    fn refuses_malformed_entries() {
        assert!(ToolRegistry::parse("send_email").is_err());
        assert!(ToolRegistry::parse("=gmail").is_err());
        assert!(ToolRegistry::parse("send_email=").is_err());
        assert_eq!(ToolRegistry::parse(" , ").map(|r| r.entries().len()), Ok(0));
    }
}
