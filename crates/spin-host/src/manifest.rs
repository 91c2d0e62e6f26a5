//! The subset of the Spin application manifest (version 2) that an HTTP application uses.
//!
//! Unknown keys are accepted and ignored, as Spin does for keys of triggers it does not run,
//! so a manifest written for `spin up` loads here unchanged.
//!
//! One key is the runner's own: `extends = "path/to/spin.toml"` makes a manifest an addition to
//! another (a test application is the product's plus a fixture tool, with no copy to keep in
//! step). Spin does not read it; such a manifest is for `gatehouse up` only.
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
    #[error("manifest {path} extends others {MAX_EXTENDS} deep; is there a loop?")]
    ExtendsTooDeep { path: PathBuf },
}

/// How many manifests one may stand on, directly or through others.
const MAX_EXTENDS: usize = 4;

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
    /// The manifest this one adds to (the runner's key, not Spin's), relative to this one's
    /// folder. [`Manifest::load`] merges it: `None` once loaded.
    #[serde(default)]
    pub extends: Option<PathBuf>,
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
    /// Host files the component may read (src/files.rs).
    #[serde(default)]
    pub files: Vec<FileMount>,
    /// Settings for tools beside Spin (`[component.<id>.tool.<name>]`), which Spin ignores;
    /// `gatehouse` reads its own (see [`Manifest::tool_migrations`]).
    #[serde(default)]
    pub tool: BTreeMap<String, toml::Table>,
    /// The folder `files` patterns are relative to, when it is not the manifest's own (a
    /// component that came from an extended manifest).
    #[serde(skip)]
    pub files_root: Option<PathBuf>,
}

/// One entry of a component's `files`, as Spin writes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum FileMount {
    /// A path or glob under the application's folder, readable at the same path under `/`.
    Pattern(String),
    /// A folder, readable at `destination`.
    Directory { source: PathBuf, destination: String },
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
        let manifest = Manifest::load_extended(path, 0)?;
        manifest.validate()?;
        Ok(manifest)
    }

    fn load_extended(path: &Path, depth: usize) -> Result<Manifest, ManifestError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ManifestError::Read { path: path.to_owned(), source })?;
        let mut manifest =
            Manifest::parse(&text).map_err(|source| ManifestError::Parse { path: path.to_owned(), source })?;
        let Some(base) = manifest.extends.take() else {
            return Ok(manifest);
        };
        if depth >= MAX_EXTENDS {
            return Err(ManifestError::ExtendsTooDeep { path: path.to_owned() });
        }
        let dir = path.parent().unwrap_or(Path::new(""));
        let base_path = dir.join(base);
        let mut base = Manifest::load_extended(&base_path, depth + 1)?;
        base.anchor(base_path.parent().unwrap_or(Path::new("")));
        Ok(base.overlaid_by(manifest))
    }

    /// Makes the components' relative paths (`source`, the build's `workdir`) independent of
    /// which manifest's folder they are later resolved against: they are this folder's.
    fn anchor(&mut self, dir: &Path) {
        let dir = lexically_normal(&std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()));
        for component in self.component.values_mut() {
            if let SourceDecl::Path(source) = &mut component.source {
                *source = dir.join(&*source);
            }
            if let Some(build) = &mut component.build {
                build.workdir = Some(build.workdir.as_ref().map_or_else(|| dir.clone(), |w| dir.join(w)));
            }
            component.files_root = Some(dir.clone());
        }
    }

    /// This manifest with `top` laid over it: `top`'s application, its variables and
    /// components in place of any of the same name, its triggers after these.
    fn overlaid_by(mut self, top: Manifest) -> Manifest {
        self.spin_manifest_version = top.spin_manifest_version;
        self.application = top.application;
        self.variables.extend(top.variables);
        self.trigger.http.extend(top.trigger.http);
        self.component.extend(top.component);
        self
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
    /// The folders of migrations components ship for their own tables
    /// (`[component.<id>.tool.gatehouse] migrations = "..."`), by component id, resolved against
    /// the folder of the manifest that declared the component.
    pub fn tool_migrations(&self, manifest_dir: &Path) -> Vec<(String, PathBuf)> {
        self.component
            .iter()
            .filter_map(|(id, decl)| {
                let dir = decl.tool.get("gatehouse")?.get("migrations")?.as_str()?;
                Some((id.clone(), decl.files_root.as_deref().unwrap_or(manifest_dir).join(dir)))
            })
            .collect()
    }

    pub(crate) fn source_path(&self, manifest_dir: &Path, component: &str) -> Option<PathBuf> {
        match &self.component.get(component)?.source {
            SourceDecl::Path(path) => Some(manifest_dir.join(path)),
            SourceDecl::Remote(_) => None,
        }
    }
}

/// `path` without `.` and `a/..` steps, so the paths it yields read as the file's place.
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir if normal.file_name().is_some() => {
                normal.pop();
            }
            other => normal.push(other),
        }
    }
    normal
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

    #[test]
    fn a_manifest_that_extends_another_adds_to_it_and_replaces_by_name() {
        let dir = std::env::temp_dir().join(format!("gatehouse-manifest-extends-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("fixtures")).expect("a scratch folder");
        std::fs::write(dir.join("spin.toml"), SAMPLE).expect("the base");
        let overlay = r#"
spin_manifest_version = 2
extends = "../spin.toml"
[application]
name = "demo-with-c"
[variables]
host = { default = "db.example:5432" }
[[trigger.http]]
route = "/c"
component = "c"
[component.c]
source = "c.wasm"
"#;
        std::fs::write(dir.join("fixtures/app.toml"), overlay).expect("the overlay");
        let manifest = Manifest::load(&dir.join("fixtures/app.toml")).expect("loads");
        assert_eq!(manifest.application.name, "demo-with-c");
        assert_eq!(manifest.variables["host"].default.as_deref(), Some("db.example:5432"));
        assert!(manifest.variables["token"].required, "the base's other variables stay");
        assert_eq!(manifest.trigger.http.len(), 3);
        let fixtures = dir.join("fixtures");
        let a = manifest.source_path(&fixtures, "a").expect("a path");
        assert_eq!(a, std::path::absolute(&dir).expect("absolute").join("a.wasm"), "the base's paths are its own");
        assert_eq!(manifest.source_path(&fixtures, "c"), Some(fixtures.join("c.wasm")));
        let workdir = manifest.component["a"].build.as_ref().and_then(|b| b.workdir.clone());
        assert_eq!(workdir, Some(std::path::absolute(&dir).expect("absolute")));

        std::fs::write(
            dir.join("loop.toml"),
            "spin_manifest_version = 2\nextends = \"loop.toml\"\n[application]\nname = \"l\"\n",
        )
        .expect("a loop");
        assert!(matches!(Manifest::load(&dir.join("loop.toml")), Err(ManifestError::ExtendsTooDeep { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
