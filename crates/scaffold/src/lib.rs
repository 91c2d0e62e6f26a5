//! A new tool from the templates of `templates/` (docs/tools.md, "A tool in any language"),
//! rendered as `spin new` renders them (Spin's template format: Liquid, with Spin's case
//! filters), without the Spin CLI. The templates are compiled in, so `gatehouse new` works from
//! any directory, and the same files are what `spin templates install --dir templates` reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use heck::{ToKebabCase, ToSnakeCase, ToUpperCamelCase};
use include_dir::{Dir, include_dir};
use liquid_core::{Display_filter, Filter, FilterReflection, ParseFilter, Runtime, Value, ValueView};

static TEMPLATES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../templates");

/// Why a template could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("a tool's name is letters, digits, '_' and '-' ({0:?} is not)")]
    BadName(String),
    #[error("{0} is not empty")]
    NotEmpty(PathBuf),
    #[error("the template {template} is broken: {reason}")]
    BrokenTemplate { template: &'static str, reason: String },
    #[error("the template {template} has no parameter {name} (it has: {known})")]
    UnknownParameter { template: &'static str, name: String, known: String },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The languages a template exists for (`templates/tool-<language>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Language {
    #[default]
    Python,
    #[cfg_attr(feature = "clap", value(name = "typescript"))]
    TypeScript,
    Rust,
}

impl Language {
    /// The template's folder under `templates/`, which is also its Spin template id.
    pub fn template(self) -> &'static str {
        match self {
            Language::Python => "tool-python",
            Language::TypeScript => "tool-typescript",
            Language::Rust => "tool-rust",
        }
    }
}

/// What to render: the tool's name as the agent calls it (`order_supplies`), what it does (the
/// template's default when `None`), the origin of the backend it calls (none when `None`), and
/// values for the template's other parameters (as `spin new --value NAME=VALUE` gives them;
/// each parameter's default otherwise).
#[derive(Debug, Clone, Default)]
pub struct NewTool {
    pub name: String,
    pub language: Language,
    pub description: Option<String>,
    pub backend: Option<String>,
    pub values: BTreeMap<String, String>,
}

impl NewTool {
    /// The folder a tool is written to when none is given: its component's name.
    pub fn default_folder(&self) -> PathBuf {
        PathBuf::from(self.name.to_kebab_case())
    }

    /// The function name the agent calls, as the templates write it (`snake_case`).
    pub fn function_name(&self) -> String {
        self.name.to_snake_case()
    }

    /// Renders the template into `output`, which must not exist or be empty; how many files it
    /// wrote.
    pub fn render(&self, output: &Path) -> Result<usize, ScaffoldError> {
        if self.name.is_empty() || !self.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(ScaffoldError::BadName(self.name.clone()));
        }
        if output.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
            return Err(ScaffoldError::NotEmpty(output.to_owned()));
        }
        let id = self.language.template();
        let broken = |reason: String| ScaffoldError::BrokenTemplate { template: id, reason };
        let template = TEMPLATES.get_dir(id).ok_or_else(|| broken("not compiled in".into()))?;
        let parameters = self.parameters(id, template)?;
        let parser = parser(id)?;
        let content = template.get_dir(template.path().join("content")).ok_or_else(|| broken("no content".into()))?;
        let mut written = 0;
        for file in files(content) {
            let relative = file.path().strip_prefix(content.path()).map_err(|error| broken(error.to_string()))?;
            let text = file.contents_utf8().ok_or_else(|| broken(format!("{} is not text", relative.display())))?;
            let rendered = parser
                .parse(text)
                .and_then(|parsed| parsed.render(&parameters))
                .map_err(|error| broken(format!("{}: {error}", relative.display())))?;
            let target = output.join(relative);
            let write = |path: &Path, result: std::io::Result<()>| {
                result.map_err(|source| ScaffoldError::Write { path: path.to_owned(), source })
            };
            if let Some(parent) = target.parent() {
                write(parent, std::fs::create_dir_all(parent))?;
            }
            write(&target, std::fs::write(&target, rendered))?;
            written += 1;
        }
        Ok(written)
    }

    /// The template's snippet for adding the tool's component to another application (what
    /// `spin add` writes: `metadata/snippets/component.txt`), with its paths under
    /// `output_path`, the tool's folder as that application's manifest names it.
    pub fn component_snippet(&self, output_path: &str) -> Result<String, ScaffoldError> {
        let id = self.language.template();
        let broken = |reason: String| ScaffoldError::BrokenTemplate { template: id, reason };
        let template = TEMPLATES.get_dir(id).ok_or_else(|| broken("not compiled in".into()))?;
        let mut parameters = self.parameters(id, template)?;
        parameters.insert("output-path".into(), Value::scalar(output_path.to_owned()));
        let snippet = template
            .get_file(template.path().join("metadata/snippets/component.txt"))
            .and_then(|file| file.contents_utf8())
            .ok_or_else(|| broken("no metadata/snippets/component.txt".into()))?;
        parser(id)?
            .parse(snippet)
            .and_then(|parsed| parsed.render(&parameters))
            .map_err(|error| broken(format!("component.txt: {error}")))
    }

    /// The values a template reads: `project-name`, and each parameter of its manifest, from
    /// this request or the manifest's default.
    fn parameters(&self, id: &'static str, template: &Dir<'_>) -> Result<liquid::Object, ScaffoldError> {
        let broken = |reason: String| ScaffoldError::BrokenTemplate { template: id, reason };
        let manifest = template
            .get_file(template.path().join("metadata/spin-template.toml"))
            .and_then(|file| file.contents_utf8())
            .ok_or_else(|| broken("no metadata/spin-template.toml".into()))?;
        let manifest: toml::Table =
            toml::from_str(manifest).map_err(|error| broken(format!("spin-template.toml: {error}")))?;
        let declared = manifest.get("parameters").and_then(toml::Value::as_table).cloned().unwrap_or_default();
        if let Some(unknown) = self.values.keys().find(|name| !declared.contains_key(*name)) {
            let known = declared.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
            return Err(ScaffoldError::UnknownParameter { template: id, name: unknown.clone(), known });
        }
        let mut values = liquid::Object::new();
        values.insert("project-name".into(), Value::scalar(self.name.clone()));
        for (name, parameter) in declared {
            let default = parameter.get("default").and_then(toml::Value::as_str).unwrap_or_default().to_owned();
            let given = match name.as_str() {
                "project-description" => self.description.clone(),
                "backend-url" => self.backend.clone(),
                _ => None,
            };
            let value = given.or_else(|| self.values.get(&name).cloned()).unwrap_or(default);
            values.insert(name.into(), Value::scalar(value));
        }
        Ok(values)
    }
}

/// Liquid with Spin's case filters, as `spin new` renders a template.
fn parser(id: &'static str) -> Result<liquid::Parser, ScaffoldError> {
    liquid::ParserBuilder::with_stdlib()
        .filter(KebabCase)
        .filter(SnakeCase)
        .filter(PascalCase)
        .build()
        .map_err(|error| ScaffoldError::BrokenTemplate { template: id, reason: error.to_string() })
}

fn files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut found: Vec<_> = dir.files().collect();
    for sub in dir.dirs() {
        found.extend(files(sub));
    }
    found
}

/// Spin's case filters, as its templates use them.
macro_rules! case_filter {
    ($name:ident, $filter:ident, $liquid:literal, $convert:ident) => {
        #[derive(Clone, ParseFilter, FilterReflection)]
        #[filter(name = $liquid, description = "Spin's case filter of the same name.", parsed($filter))]
        struct $name;

        #[derive(Debug, Default, Display_filter)]
        #[name = $liquid]
        struct $filter;

        impl Filter for $filter {
            fn evaluate(&self, input: &dyn ValueView, _runtime: &dyn Runtime) -> liquid_core::Result<Value> {
                Ok(Value::scalar(input.to_kstr().as_str().$convert()))
            }
        }
    };
}

case_filter!(KebabCase, KebabCaseFilter, "kebab_case", to_kebab_case);
case_filter!(SnakeCase, SnakeCaseFilter, "snake_case", to_snake_case);
case_filter!(PascalCase, PascalCaseFilter, "pascal_case", to_upper_camel_case);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every language's template is compiled in and renders with the name in each case the
    /// templates use; sdk/test builds what they render.
    #[test]
    fn each_template_renders_its_names() {
        for language in [Language::Python, Language::TypeScript, Language::Rust] {
            let output =
                std::env::temp_dir().join(format!("gatehouse-scaffold-{}-{}", language.template(), std::process::id()));
            let _ = std::fs::remove_dir_all(&output);
            let tool = NewTool {
                name: "order_supplies".into(),
                language,
                description: Some("Orders paper.".into()),
                ..NewTool::default()
            };
            let written = tool.render(&output).expect("the template renders");
            assert!(written >= 4, "{}: {written} files", language.template());
            let manifest = std::fs::read_to_string(output.join("spin.toml")).expect("a spin.toml");
            assert!(manifest.contains("[component.order-supplies]"), "{manifest}");
            assert!(
                manifest.contains("postgres://{{ db_host }}"),
                "Spin's own variables are left for Spin: {manifest}"
            );
            assert!(manifest.contains("description = \"Orders paper.\""), "{manifest}");
            assert!(!manifest.contains("{%"), "{manifest}");
            assert!(matches!(tool.render(&output), Err(ScaffoldError::NotEmpty(_))));
            std::fs::remove_dir_all(&output).expect("cleaned up");
        }
        let bad = NewTool { name: "a b".into(), ..NewTool::default() };
        assert!(matches!(bad.render(Path::new("unused")), Err(ScaffoldError::BadName(_))));
        let values = BTreeMap::from([("no-such-parameter".to_owned(), "x".to_owned())]);
        let unknown = NewTool { name: "a".into(), values, ..NewTool::default() };
        let output = std::env::temp_dir().join(format!("gatehouse-scaffold-unknown-{}", std::process::id()));
        assert!(matches!(unknown.render(&output), Err(ScaffoldError::UnknownParameter { .. })));
    }

    /// With a backend, each template's tool may reach it and reads it, in its own spin.toml and
    /// in the snippet that adds it to an application (under the application variable named
    /// after the tool); without one, neither names a backend.
    #[test]
    fn a_backend_is_named_in_the_manifest_and_the_snippet() {
        for language in [Language::Python, Language::TypeScript, Language::Rust] {
            let output = std::env::temp_dir().join(format!(
                "gatehouse-scaffold-backend-{}-{}",
                language.template(),
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&output);
            let tool = NewTool {
                name: "order_supplies".into(),
                language,
                backend: Some("http://127.0.0.1:8400".into()),
                ..NewTool::default()
            };
            tool.render(&output).expect("the template renders");
            let manifest = std::fs::read_to_string(output.join("spin.toml")).expect("a spin.toml");
            let parsed: toml::Table = toml::from_str(&manifest).expect("TOML");
            assert_eq!(parsed["variables"]["backend_url"]["default"].as_str(), Some("http://127.0.0.1:8400"));
            let component = &parsed["component"]["order-supplies"];
            let hosts = component["allowed_outbound_hosts"].as_array().expect("hosts");
            assert!(hosts.iter().any(|h| h.as_str() == Some("{{ backend_url }}")), "{manifest}");
            assert_eq!(component["variables"]["backend_url"].as_str(), Some("{{ backend_url }}"));
            std::fs::remove_dir_all(&output).expect("cleaned up");

            let snippet = tool.component_snippet("tools/order-supplies").expect("the snippet renders");
            let parsed: toml::Table = toml::from_str(&snippet).expect("TOML");
            let component = &parsed["component"]["order-supplies"];
            let hosts = component["allowed_outbound_hosts"].as_array().expect("hosts");
            assert!(hosts.iter().any(|h| h.as_str() == Some("{{ order_supplies_backend_url }}")), "{snippet}");
            assert_eq!(component["variables"]["backend_url"].as_str(), Some("{{ order_supplies_backend_url }}"));
            assert!(component["source"].as_str().is_some_and(|s| s.starts_with("tools/order-supplies/")), "{snippet}");

            let without = NewTool { backend: None, ..tool };
            let snippet = without.component_snippet("x").expect("the snippet renders");
            assert!(!snippet.contains("backend_url"), "{snippet}");
        }
    }
}
