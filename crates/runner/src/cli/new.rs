//! `gatehouse new tool NAME --lang python`: a new tool from the templates of
//! `templates/` (docs/tools.md, "A tool in any language"), rendered as `spin new` renders them
//! (Spin's template format: Liquid, with Spin's case filters), without the Spin CLI. The
//! templates are compiled into the binary, so it works from any directory.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use heck::{ToKebabCase, ToSnakeCase, ToUpperCamelCase};
use include_dir::{Dir, include_dir};
use liquid_core::{Display_filter, Filter, FilterReflection, ParseFilter, Runtime, Value, ValueView};

static TEMPLATES: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/../../templates");

#[derive(Subcommand)]
pub(crate) enum NewCommand {
    /// A tool: a Spin application with one component serving the tool contract.
    Tool(ToolArgs),
}

#[derive(Args)]
pub(crate) struct ToolArgs {
    /// The tool's name, as the agent calls it (`order_supplies`); the component is its
    /// kebab-case form.
    name: String,
    /// The language it is written in.
    #[arg(long, value_enum)]
    lang: Language,
    /// What the tool does, for the agent (the template's default otherwise).
    #[arg(long)]
    description: Option<String>,
    /// The folder to write it to (the component's name under the current folder by default);
    /// it must not exist, or be empty.
    #[arg(long)]
    output: Option<PathBuf>,
}

/// The languages a template exists for (`templates/tool-<language>`).
#[derive(Clone, Copy, ValueEnum)]
enum Language {
    Python,
}

impl Language {
    fn template(self) -> &'static str {
        match self {
            Language::Python => "tool-python",
        }
    }
}

pub(crate) fn run(command: NewCommand) -> Result<()> {
    let NewCommand::Tool(args) = command;
    if args.name.is_empty() || !args.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        bail!("a tool's name is letters, digits, '_' and '-' ({:?} is not)", args.name);
    }
    let template = TEMPLATES
        .get_dir(args.lang.template())
        .with_context(|| format!("this gatehouse has no {} template", args.lang.template()))?;
    let output = args.output.clone().unwrap_or_else(|| PathBuf::from(args.name.to_kebab_case()));
    let written = render(template, &args, &output)?;
    println!("wrote {} files to {}", written, output.display());
    println!(
        "next: build it (gatehouse build --manifest {}/spin.toml), then check it with gatehouse tools check",
        output.display()
    );
    Ok(())
}

/// Renders `template`'s content into `output`; how many files it wrote.
fn render(template: &Dir<'_>, args: &ToolArgs, output: &Path) -> Result<usize> {
    if output.read_dir().is_ok_and(|mut entries| entries.next().is_some()) {
        bail!("{} is not empty", output.display());
    }
    let parameters = parameters(template, args)?;
    let parser = liquid::ParserBuilder::with_stdlib()
        .filter(KebabCase)
        .filter(SnakeCase)
        .filter(PascalCase)
        .build()
        .context("the template engine")?;
    let content = template.get_dir(template.path().join("content")).context("the template has no content")?;
    let mut written = 0;
    for file in files(content) {
        let relative = file.path().strip_prefix(content.path()).context("a template file outside its content")?;
        let text = file.contents_utf8().with_context(|| format!("{} is not text", relative.display()))?;
        let rendered = parser
            .parse(text)
            .and_then(|parsed| parsed.render(&parameters))
            .with_context(|| format!("rendering {}", relative.display()))?;
        let target = output.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&target, rendered).with_context(|| format!("writing {}", target.display()))?;
        written += 1;
    }
    Ok(written)
}

fn files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut found: Vec<_> = dir.files().collect();
    for sub in dir.dirs() {
        found.extend(files(sub));
    }
    found
}

/// The values a template reads: `project-name`, and each parameter of its manifest, from the
/// command line or the manifest's default.
fn parameters(template: &Dir<'_>, args: &ToolArgs) -> Result<liquid::Object> {
    let manifest = template
        .get_file(template.path().join("metadata/spin-template.toml"))
        .and_then(|file| file.contents_utf8())
        .context("the template has no metadata/spin-template.toml")?;
    let manifest: toml::Table = toml::from_str(manifest).context("metadata/spin-template.toml")?;
    let mut values = liquid::Object::new();
    values.insert("project-name".into(), Value::scalar(args.name.clone()));
    let declared = manifest.get("parameters").and_then(toml::Value::as_table).cloned().unwrap_or_default();
    for (name, parameter) in declared {
        let default = parameter.get("default").and_then(toml::Value::as_str).unwrap_or_default().to_owned();
        let value = match name.as_str() {
            "project-description" => args.description.clone().unwrap_or(default),
            _ => default,
        };
        values.insert(name.into(), Value::scalar(value));
    }
    Ok(values)
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
