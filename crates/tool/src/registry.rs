//! The tool registry: which component implements which function name.
//!
//! It is the application variable `tool_registry`, a comma-separated list of
//! `name[|alias...]=component` entries, e.g. `send_email|send_gmail=gmail,query_vector_db=vector-query`.
//! Adding a tool is one component plus one entry here.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// The canonical function name (the first name of the entry).
    pub name: String,
    pub aliases: Vec<String>,
    pub component: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolRegistry {
    entries: Vec<RegistryEntry>,
}

impl ToolRegistry {
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
            entries.push(RegistryEntry { name, aliases: names.collect(), component: component.to_owned() });
        }
        Ok(ToolRegistry { entries })
    }

    /// The entry for a function name or one of its aliases.
    pub fn resolve(&self, function: &str) -> Option<&RegistryEntry> {
        self.entries.iter().find(|e| e.name == function || e.aliases.iter().any(|a| a == function))
    }

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
    fn refuses_malformed_entries() {
        assert!(ToolRegistry::parse("send_email").is_err());
        assert!(ToolRegistry::parse("=gmail").is_err());
        assert!(ToolRegistry::parse("send_email=").is_err());
        assert_eq!(ToolRegistry::parse(" , ").map(|r| r.entries().len()), Ok(0));
    }
}
