//! `gatehouse new tool NAME --lang python|typescript`: a new tool from the templates compiled into
//! `gatehouse-scaffold` (docs/tools.md, "A tool in any language").

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
    /// The folder to write it to (the component's name under the current folder by default);
    /// it must not exist, or be empty.
    #[arg(long)]
    output: Option<PathBuf>,
}

pub(crate) fn run(command: NewCommand) -> Result<()> {
    let NewCommand::Tool(args) = command;
    let tool = NewTool { name: args.name, language: args.lang, description: args.description };
    let output = args.output.unwrap_or_else(|| tool.default_folder());
    let written = tool.render(&output)?;
    println!("wrote {} files to {}", written, output.display());
    println!(
        "next: build it (gatehouse build --manifest {}/spin.toml), then check it with gatehouse tools check",
        output.display()
    );
    Ok(())
}
