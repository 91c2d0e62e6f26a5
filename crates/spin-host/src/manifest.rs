//! The subset of the Spin application manifest (version 2) that an HTTP application uses.
//!
//! Unknown keys are accepted and ignored, as Spin does for keys of triggers it does not run,
//! so a manifest written for `spin up` loads here unchanged.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot read manifest {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("invalid manifest {path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("unsupported spin_manifest_version {0}: only version 2 is supported")]
    Version(u32),
    #[error("trigger for route {route:?} names component {component:?}, which is not defined")]
    UnknownComponent { route: String, component: String },
    #[error("component {component:?}: only a local `source` path is supported")]
    RemoteSource { component: String },
    #[error("invalid route {route:?}: {reason}")]
    Route { route: String, reason: String },
}

#[derive(Debug, Deserialize)]
pub struct Manifest {
    pub spin_manifest_version: u32,
    pub application: Application,
    #[serde(default)]
    pub variables: BTreeMap<String, VariableDecl>,
    #[serde(default)]
    pub trigger: Triggers,
    #[serde(default)]
    pub component: BTreeMap<String, ComponentDecl>,
}

#[derive(Debug, Deserialize)]
pub struct Application {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
}

/// An application variable: `{ default = "..." }`, `{ required = true }`, optionally `secret`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct VariableDecl {
    #[serde(default)]
    pub default: Option<String>,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub secret: bool,
}

#[derive(Debug, Default, Deserialize)]
pub struct Triggers {
    #[serde(default)]
    pub http: Vec<HttpTrigger>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct HttpTrigger {
    #[serde(default)]
    pub id: Option<String>,
    pub route: RouteDecl,
    pub component: String,
}

/// `route = "/path"` or `route = { private = true }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RouteDecl {
    Path(String),
    Private { private: bool },
}

#[derive(Debug, Clone, Deserialize)]
pub struct ComponentDecl {
    pub source: SourceDecl,
    #[serde(default)]
    pub allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub variables: BTreeMap<String, String>,
    #[serde(default)]
    pub build: Option<BuildDecl>,
    /// The models `fermyon:spin/llm` lets this component use; any other is refused.
    #[serde(default)]
    pub ai_models: Vec<String>,
    #[serde(default)]
    pub environment: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SourceDecl {
    Path(PathBuf),
    Remote(toml::Value),
}

#[derive(Debug, Clone, Deserialize)]
pub struct BuildDecl {
    pub command: String,
    #[serde(default)]
    pub workdir: Option<PathBuf>,
}

impl Manifest {
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ManifestError::Read { path: path.to_owned(), source })?;
        let manifest =
            Manifest::parse(&text).map_err(|source| ManifestError::Parse { path: path.to_owned(), source })?;
        manifest.validate()?;
        Ok(manifest)
    }

    pub(crate) fn parse(text: &str) -> Result<Manifest, toml::de::Error> {
        toml::from_str(text)
    }

    pub(crate) fn validate(&self) -> Result<(), ManifestError> {
        if self.spin_manifest_version != 2 {
            return Err(ManifestError::Version(self.spin_manifest_version));
        }
        for trigger in &self.trigger.http {
            if !self.component.contains_key(&trigger.component) {
                return Err(ManifestError::UnknownComponent {
                    route: format!("{:?}", trigger.route),
                    component: trigger.component.clone(),
                });
            }
        }
        for (id, component) in &self.component {
            if let SourceDecl::Remote(_) = component.source {
                return Err(ManifestError::RemoteSource { component: id.clone() });
            }
        }
        Ok(())
    }

    /// The component's `.wasm` file, relative paths resolved against the manifest's folder.
    pub(crate) fn source_path(&self, manifest_dir: &Path, component: &str) -> Option<PathBuf> {
        match &self.component.get(component)?.source {
            SourceDecl::Path(path) => Some(manifest_dir.join(path)),
            SourceDecl::Remote(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
spin_manifest_version = 2
[application]
name = "demo"
[variables]
token = { required = true, secret = true }
host = { default = "127.0.0.1:5432" }
[[trigger.http]]
route = "/a/..."
component = "a"
[[trigger.http]]
route = { private = true }
component = "b"
[component.a]
source = "a.wasm"
allowed_outbound_hosts = ["postgres://{{ host }}"]
[component.a.variables]
token = "{{ token }}"
[component.a.build]
command = "cargo build"
[component.b]
source = "b.wasm"
"#;

    #[test]
    fn parses_variables_triggers_and_components() {
        let manifest = Manifest::parse(SAMPLE).expect("parses");
        manifest.validate().expect("valid");
        assert!(manifest.variables["token"].required);
        assert!(manifest.variables["token"].secret);
        assert_eq!(manifest.variables["host"].default.as_deref(), Some("127.0.0.1:5432"));
        assert!(matches!(&manifest.trigger.http[0].route, RouteDecl::Path(p) if p == "/a/..."));
        assert!(matches!(manifest.trigger.http[1].route, RouteDecl::Private { private: true }));
        assert_eq!(manifest.component["a"].variables["token"], "{{ token }}");
        assert_eq!(manifest.component["a"].build.as_ref().map(|b| b.command.as_str()), Some("cargo build"));
    }

    #[test]
    fn a_component_lists_the_ai_models_it_may_use() {
        let text = SAMPLE.replace("source = \"b.wasm\"", "source = \"b.wasm\"\nai_models = [\"all-minilm-l6-v2\"]");
        let manifest = Manifest::parse(&text).expect("parses");
        assert_eq!(manifest.component["b"].ai_models, ["all-minilm-l6-v2"]);
        assert!(manifest.component["a"].ai_models.is_empty());
    }

    #[test]
    fn rejects_a_trigger_for_an_unknown_component() {
        let text = SAMPLE.replace("component = \"b\"", "component = \"missing\"");
        let manifest = Manifest::parse(&text).expect("parses");
        assert!(matches!(manifest.validate(), Err(ManifestError::UnknownComponent { .. })));
    }
}
