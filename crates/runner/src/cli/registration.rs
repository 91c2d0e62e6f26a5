//! Registering a tool in a Gatehouse application's spin.toml: its two routes, its component, the
//! application variables it reads and its `tool_registry` entry. `gatehouse tools add` (a
//! declared tool) and `gatehouse new tool` (a tool from a template) both write through this, so
//! spin.toml stays the one description of what runs and both write it the same way
//! (docs/tools.md, "A declared tool" and "A tool in any language").

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use toml_edit::{DocumentMut, InlineTable, Item, Table, value};

/// A Gatehouse application's manifest, being edited; nothing is written before `save`.
pub(crate) struct Registration {
    path: PathBuf,
    document: DocumentMut,
}

/// How an application variable is declared when it is not yet.
pub(crate) enum Variable<'a> {
    /// `{ required = true }`, with `secret = true` when it is one.
    Required { secret: bool },
    /// `{ default = "..." }`.
    Default(&'a str),
}

impl Registration {
    /// Opens the manifest at `path` to register the component `id`, which it must not have yet.
    pub(crate) fn open(path: &Path, id: &str) -> Result<Registration> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let document: DocumentMut = text.parse().with_context(|| format!("parsing {}", path.display()))?;
        if document.get("component").and_then(|c| c.get(id)).is_some() {
            bail!("{} already has a component '{id}'", path.display());
        }
        let registration = Registration { path: path.to_owned(), document };
        registration.registry_default()?;
        Ok(registration)
    }

    /// The folder the manifest's relative paths start from.
    pub(crate) fn folder(&self) -> PathBuf {
        self.path.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    /// `path` as the manifest names it: relative to its folder, with `/`; an error when it is
    /// outside that folder.
    pub(crate) fn relative(&self, path: &Path) -> Result<String> {
        let folder = self.folder();
        let absolute = std::path::absolute(path)?;
        Ok(absolute
            .strip_prefix(&folder)
            .with_context(|| format!("{} must be inside the manifest's folder {}", path.display(), folder.display()))?
            .to_string_lossy()
            .replace('\\', "/"))
    }

    /// Declares the application variable `name` unless the manifest already does.
    pub(crate) fn declare(&mut self, name: &str, how: Variable<'_>) {
        let variables = self.document["variables"].or_insert(Item::Table(Table::new()));
        if variables.get(name).is_some() {
            return;
        }
        let mut spec = InlineTable::new();
        match how {
            Variable::Required { secret } => {
                spec.insert("required", true.into());
                if secret {
                    spec.insert("secret", true.into());
                }
            }
            Variable::Default(default) => {
                spec.insert("default", default.into());
            }
        }
        variables[name] = value(spec);
    }

    /// Adds `names` (the function name, then its aliases) for component `id` to the default of
    /// `tool_registry`.
    pub(crate) fn register(&mut self, names: &[String], id: &str) -> Result<()> {
        let Some(name) = names.first() else { bail!("a tool needs a name") };
        let current = self.registry_default()?;
        let listed = current.split(',').any(|e| e.split('=').next().is_some_and(|n| n.split('|').any(|n| n == name)));
        if listed {
            bail!("tool_registry already names {name}");
        }
        let entry = format!("{}={id}", names.join("|"));
        let updated = if current.trim().is_empty() { entry } else { format!("{current},{entry}") };
        self.registry()?.insert("default", updated.into());
        Ok(())
    }

    /// Adds component `id`'s section and its two routes: the private one other components chain
    /// to, and `/internal/tools/<id>/...`, where a signed request reaches it.
    pub(crate) fn add_component(&mut self, id: &str, component: Table) -> Result<()> {
        // A manifest that extends another may have no trigger yet: indexing would make it an
        // inline table, which cannot hold [[trigger.http]].
        let trigger = self.document.as_table_mut().entry("trigger").or_insert(Item::Table(Table::new()));
        let trigger = trigger.as_table_mut().context("[trigger] is not a table")?;
        trigger.set_implicit(true);
        let triggers = trigger.entry("http").or_insert(Item::ArrayOfTables(Default::default()));
        let triggers = triggers.as_array_of_tables_mut().context("[[trigger.http]] is not an array of tables")?;
        let mut private = Table::new();
        private["route"] = value({
            let mut route = InlineTable::new();
            route.insert("private", true.into());
            route
        });
        private["component"] = value(id);
        triggers.push(private);
        let mut signed = Table::new();
        signed["route"] = value(gatehouse_domain::contract::tool_host_route(id));
        signed["component"] = value(id);
        triggers.push(signed);

        let components = self.document["component"].or_insert(Item::Table(Table::new()));
        components.as_table_mut().context("[component] is not a table")?.set_implicit(true);
        components[id] = Item::Table(component);
        Ok(())
    }

    /// Writes the manifest back.
    pub(crate) fn save(self) -> Result<()> {
        std::fs::write(&self.path, self.document.to_string())
            .with_context(|| format!("writing {}", self.path.display()))
    }

    fn registry(&mut self) -> Result<&mut InlineTable> {
        self.document
            .get_mut("variables")
            .and_then(|v| v.get_mut("tool_registry"))
            .and_then(|r| r.as_inline_table_mut())
            .with_context(|| format!("{} has no tool_registry = {{ default = \"...\" }} variable", self.path.display()))
    }

    fn registry_default(&self) -> Result<String> {
        let registry = self
            .document
            .get("variables")
            .and_then(|v| v.get("tool_registry"))
            .and_then(|r| r.as_inline_table())
            .with_context(|| {
                format!("{} has no tool_registry = {{ default = \"...\" }} variable", self.path.display())
            })?;
        Ok(registry.get("default").and_then(|d| d.as_str()).unwrap_or_default().to_owned())
    }
}

/// A section of another TOML document (a template's snippet) as a table of this one: its
/// values kept, its place in the other document forgotten, so it is written where it is put.
pub(crate) fn detached(table: &Table) -> Table {
    let mut copy = Table::new();
    for (key, item) in table.iter() {
        copy[key] = match item {
            Item::Table(inner) => Item::Table(detached(inner)),
            other => other.clone(),
        };
    }
    copy
}
