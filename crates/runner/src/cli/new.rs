//! `gatehouse new tool NAME --lang python|typescript|rust`: a new tool from the templates
//! compiled into `gatehouse-scaffold` (docs/tools.md, "A tool in any language").

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use gatehouse_scaffold::{Language, NewTool};

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
}

pub(crate) fn run(command: NewCommand) -> Result<()> {
    let NewCommand::Tool(args) = command;
    let tool = NewTool {
        name: args.name,
        language: args.lang,
        description: args.description,
        values: args.values.into_iter().collect(),
    };
    let output = args.output.unwrap_or_else(|| tool.default_folder());
    let written = tool.render(&output)?;
    println!("wrote {} files to {}", written, output.display());
    let component = tool.default_folder();
    let component = component.display();
    println!("next: build it with gatehouse build --manifest {}/spin.toml, serve it, and check it:", output.display());
    // A Rust tool checks each call against Gatehouse's record of it, so the kit makes real
    // calls through an application; an SDK's tool keeps its own records (docs/tools.md).
    match tool.language {
        Language::Rust => println!("  gatehouse tools check --through http://127.0.0.1:3000 {component}"),
        Language::Python | Language::TypeScript => {
            println!("  gatehouse tools check http://127.0.0.1:3000/internal/tools/{component}")
        }
    }
    Ok(())
}

fn parse_value(value: &str) -> Result<(String, String), String> {
    value
        .split_once('=')
        .map(|(name, value)| (name.trim().to_owned(), value.to_owned()))
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("{value:?} is not NAME=VALUE"))
}
