//! Application variables, resolved once at start-up as `spin up` does.
//!
//! Sources, highest priority first: `--variable name=value` flags, `SPIN_VARIABLE_<NAME>`
//! environment variables, values the runner itself provides (the database it started), and
//! the manifest's `default`. Component variables and `allowed_outbound_hosts` are templates
//! over application variables (`"{{ db_host }}"`), expanded here.
use std::collections::{BTreeMap, HashMap};

use crate::manifest::Manifest;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum VariableError {
    #[error(
        "missing required variable '{name}': set SPIN_VARIABLE_{upper} or pass --variable {name}=VALUE",
        upper = name.to_uppercase()
    )]
    MissingRequired { name: String },
    #[error("invalid variable name '{0}': use lowercase letters, digits and underscores, starting with a letter")]
    InvalidName(String),
    #[error("template {template:?} names '{name}', which is not an application variable")]
    UnknownInTemplate { template: String, name: String },
    #[error("unterminated '{{{{' in template {0:?}")]
    Unterminated(String),
    #[error("invalid --variable {0:?}: expected NAME=VALUE")]
    BadFlag(String),
}

/// Where a variable's value may come from, other than the manifest default.
#[derive(Default, Clone)]
pub struct VariableSources {
    pub flags: HashMap<String, String>,
    pub env: HashMap<String, String>,
    pub provided: HashMap<String, String>,
}

impl VariableSources {
    /// Reads `SPIN_VARIABLE_*` from the process environment.
    pub fn from_process_env() -> VariableSources {
        let env = std::env::vars()
            .filter_map(|(k, v)| k.strip_prefix("SPIN_VARIABLE_").map(|n| (n.to_lowercase(), v)))
            .collect();
        VariableSources { env, ..Default::default() }
    }

    pub fn add_flag(&mut self, flag: &str) -> Result<(), VariableError> {
        let (name, value) = flag.split_once('=').ok_or_else(|| VariableError::BadFlag(flag.to_owned()))?;
        self.flags.insert(name.trim().to_owned(), value.to_owned());
        Ok(())
    }

    /// The value set for `name` by a flag, the environment or the runner, in that order.
    pub fn lookup(&self, name: &str) -> Option<&String> {
        self.flags.get(name).or_else(|| self.env.get(name)).or_else(|| self.provided.get(name))
    }
}

/// Every application variable's value. Debug output never shows values: some are secrets.
#[derive(Clone)]
pub(crate) struct ResolvedVariables {
    app: BTreeMap<String, String>,
}

impl std::fmt::Debug for ResolvedVariables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.app.keys()).finish()
    }
}

pub(crate) fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl ResolvedVariables {
    pub(crate) fn resolve(manifest: &Manifest, sources: &VariableSources) -> Result<ResolvedVariables, VariableError> {
        let mut app = BTreeMap::new();
        for (name, decl) in &manifest.variables {
            if !is_valid_name(name) {
                return Err(VariableError::InvalidName(name.clone()));
            }
            let value = sources.lookup(name).cloned().or_else(|| decl.default.clone());
            match value {
                Some(value) => {
                    app.insert(name.clone(), value);
                }
                None if decl.required => {
                    return Err(VariableError::MissingRequired { name: name.clone() });
                }
                None => {}
            }
        }
        Ok(ResolvedVariables { app })
    }

    #[cfg(test)]
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.app.get(name).map(String::as_str)
    }

    /// Expands `{{ name }}` references to application variables.
    pub(crate) fn expand(&self, template: &str) -> Result<String, VariableError> {
        let mut out = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(start) = rest.find("{{") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find("}}").ok_or_else(|| VariableError::Unterminated(template.to_owned()))?;
            let name = after[..end].trim();
            let value = self.app.get(name).ok_or_else(|| VariableError::UnknownInTemplate {
                template: template.to_owned(),
                name: name.to_owned(),
            })?;
            out.push_str(value);
            rest = &after[end + 2..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// A component's own variables, with their templates expanded.
    pub(crate) fn for_component(
        &self,
        templates: &BTreeMap<String, String>,
    ) -> Result<HashMap<String, String>, VariableError> {
        templates
            .iter()
            .map(|(name, template)| {
                if !is_valid_name(name) {
                    return Err(VariableError::InvalidName(name.clone()));
                }
                Ok((name.clone(), self.expand(template)?))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest::parse(
            r#"
spin_manifest_version = 2
[application]
name = "t"
[variables]
token = { required = true, secret = true }
host = { default = "db.local:5432" }
mode = { default = "dev" }
"#,
        )
        .expect("parses")
    }

    #[test]
    fn flags_beat_env_beat_provided_beat_default() {
        let m = manifest();
        let mut sources = VariableSources::default();
        sources.provided.insert("token".into(), "provided".into());
        sources.provided.insert("mode".into(), "provided".into());
        sources.env.insert("token".into(), "env".into());
        let vars = ResolvedVariables::resolve(&m, &sources).expect("resolves");
        assert_eq!(vars.get("token"), Some("env"));
        assert_eq!(vars.get("mode"), Some("provided"));
        assert_eq!(vars.get("host"), Some("db.local:5432"));
        sources.add_flag("token=flag").expect("flag");
        let vars = ResolvedVariables::resolve(&m, &sources).expect("resolves");
        assert_eq!(vars.get("token"), Some("flag"));
    }

    #[test]
    fn missing_required_variable_is_a_clear_error() {
        let err = ResolvedVariables::resolve(&manifest(), &VariableSources::default()).unwrap_err();
        assert_eq!(err, VariableError::MissingRequired { name: "token".into() });
        assert!(err.to_string().contains("SPIN_VARIABLE_TOKEN"));
    }

    #[test]
    fn templates_expand_and_unknown_names_fail() {
        let mut sources = VariableSources::default();
        sources.add_flag("token=s3cret").expect("flag");
        let vars = ResolvedVariables::resolve(&manifest(), &sources).expect("resolves");
        assert_eq!(vars.expand("postgres://{{ host }}").expect("expands"), "postgres://db.local:5432");
        assert_eq!(vars.expand("{{host}}/{{ mode }}").expect("expands"), "db.local:5432/dev");
        assert!(matches!(vars.expand("{{ nope }}"), Err(VariableError::UnknownInTemplate { .. })));
        assert!(matches!(vars.expand("{{ host"), Err(VariableError::Unterminated(_))));
        assert!(!format!("{vars:?}").contains("s3cret"));
    }

    #[test]
    fn bad_flag_and_bad_names() {
        assert!(VariableSources::default().add_flag("novalue").is_err());
        assert!(is_valid_name("db_url"));
        assert!(!is_valid_name("DB_URL"));
        assert!(!is_valid_name("1x"));
    }
}
