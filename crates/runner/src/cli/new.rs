//! `gatehouse new tool NAME --lang python|typescript|rust`: a new tool from the templates
//! compiled into `gatehouse-scaffold` (docs/tools.md, "A tool in any language"), added to the
//! Gatehouse application whose manifest is at hand, as `gatehouse tools add` adds a declared
//! tool (`registration`): its routes, its component (the template's snippet, what `spin add`
//! writes), the variables it reads, its migrations and its `tool_registry` entry.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use gatehouse_declaration::Origin;
use gatehouse_scaffold::{Language, NewTool};
use toml_edit::DocumentMut;

use super::registration::{Registration, Variable, detached};

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
    /// A value for one of the template's parameters, as `spin new --value` takes it
    /// (`gatehouse-repository=../gatehouse` for the Rust template); repeat for more.
    #[arg(long = "value", value_name = "NAME=VALUE", value_parser = parse_value)]
    values: Vec<(String, String)>,
    /// The folder to write it to (the component's name under the current folder by default);
    /// it must not exist, or be empty.
    #[arg(long)]
    output: Option<PathBuf>,
    /// The origin of the backend the tool calls (`http://127.0.0.1:8400`): the component may
    /// reach it (`allowed_outbound_hosts`) and reads it as its `backend_url` variable.
    #[arg(long, value_name = "ORIGIN", value_parser = parse_backend)]
    backend: Option<String>,
    /// The Gatehouse application to add the tool to (`spin.toml` of the current folder, when
    /// there is one); the tool's folder must be inside the manifest's.
    #[arg(long, short = 'f', env = "GATEHOUSE_MANIFEST")]
    manifest: Option<PathBuf>,
    /// Only write the tool's folder (a tool host of its own); change no application's manifest.
    #[arg(long, conflicts_with = "manifest")]
    standalone: bool,
}

pub(crate) fn run(command: NewCommand) -> Result<()> {
    let NewCommand::Tool(args) = command;
    let tool = NewTool {
        name: args.name,
        language: args.lang,
        description: args.description,
        backend: args.backend,
        values: args.values.into_iter().collect(),
    };
    let output = args.output.unwrap_or_else(|| tool.default_folder());
    let manifest = match (args.standalone, args.manifest) {
        (true, _) => None,
        (false, Some(manifest)) => Some(manifest),
        (false, None) => Some(PathBuf::from("spin.toml")).filter(|default| default.is_file()),
    };
    let component = tool.default_folder();
    let component = component.display().to_string();
    // Everything that can refuse the application's manifest does before a file is written.
    let registration = match &manifest {
        Some(manifest) => {
            let manifest = std::path::absolute(manifest).context("resolving the manifest path")?;
            let mut registration = Registration::open(&manifest, &component)?;
            registration.register(&[tool.function_name()], &component)?;
            let folder = registration.relative(&output)?;
            Some((manifest, registration, folder))
        }
        None => None,
    };
    let written = tool.render(&output)?;
    println!("wrote {} files to {}", written, output.display());
    let build_manifest = match registration {
        Some((manifest, registration, folder)) => {
            add(&tool, registration, &component, &folder)?;
            println!("added {} as component '{component}' to {}", tool.name, manifest.display());
            manifest
        }
        None => output.join("spin.toml"),
    };
    println!("next: build it with gatehouse build --manifest {}, serve it, and check it:", build_manifest.display());
    // A Rust tool checks each call against Gatehouse's record of it, so the kit makes real
    // calls through an application; an SDK's tool keeps its own records (docs/tools.md).
    match tool.language {
        Language::Rust => println!("  gatehouse tools check --through http://127.0.0.1:3000 {component}"),
        Language::Python | Language::TypeScript => {
            println!(
                "  gatehouse tools check {}",
                gatehouse_domain::contract::tool_host_url("http://127.0.0.1:3000", &component)
            )
        }
    }
    Ok(())
}

/// Adds the rendered tool in `folder` (as the manifest names it) to the application, whose
/// `tool_registry` already names it.
fn add(tool: &NewTool, mut registration: Registration, component: &str, folder: &str) -> Result<()> {
    let snippet: DocumentMut =
        tool.component_snippet(folder)?.parse().context("the template's component snippet is not TOML")?;
    let section = snippet
        .get("component")
        .and_then(|components| components.get(component))
        .and_then(|section| section.as_table())
        .with_context(|| format!("the template's component snippet has no [component.{component}]"))?;
    // What the snippet's component reads, for a manifest that does not declare it yet (the
    // application's own spin.toml does, but for the backend's).
    registration.declare("db_url", Variable::Required { secret: true });
    registration.declare("db_host", Variable::Default("127.0.0.1:5432"));
    registration.declare("contract_secret", Variable::Default(""));
    if let Some(backend) = &tool.backend {
        registration.declare(&format!("{}_backend_url", tool.function_name()), Variable::Default(backend));
    }
    registration.add_component(component, detached(section))?;
    registration.save()
}

fn parse_backend(backend: &str) -> Result<String, String> {
    Origin::literal(backend)
}

fn parse_value(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(name, value)| (name.trim().to_owned(), value.to_owned()))
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("{value:?} is not NAME=VALUE"))
}
