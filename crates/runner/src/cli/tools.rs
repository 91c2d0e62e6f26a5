//! `gatehouse tools check` and `gatehouse tools add`: declared tools (docs/tools.md, "A declared
//! tool"), checked before anything starts and registered in one step; and the conformance kit,
//! which checks a running tool against the tool contract (docs/tools.md, "Checking a tool"),
//! or, with `--backend`, a declared tool's backend against what a declared tool promises
//! (docs/architecture.md, "Declared tools").
//!
//! A declared tool is a component of spin.toml whose `declaration` variable names its
//! declaration file, mounted with the component's `files`. `add` writes that component, its
//! routes, its variables and its registry entry into spin.toml (through `registration`, as
//! `gatehouse new tool` does); `up` checks every declared tool of the manifest before it starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use gatehouse_declaration::{Declared, Origin};
use gatehouse_spin_host::manifest::{ComponentDecl, FileMount, Manifest};
use gatehouse_spin_host::variables::{VariableError, VariableSources};
use toml_edit::{Array, Item, Table, value};

use super::AppArgs;
use super::registration::{Registration, Variable};

/// The variable of a declared tool's component that names its declaration file.
const DECLARATION_VARIABLE: &str = "declaration";
/// Where the generic component is built (`components/declared-tool`).
const DECLARED_TOOL_SOURCE: &str = "target/wasm32-wasip2/release/declared_tool.wasm";

#[derive(Subcommand)]
pub(crate) enum ToolsCommand {
    /// Check declaration files (each problem as `FILE: FIELD: WHAT IS WRONG`), or with none
    /// every declared tool of the manifest; or run the conformance kit against running tools,
    /// named by their contract's base URL, or with --backend against the backends declaration
    /// files name, and print each rule's verdict.
    Check(CheckArgs),
    /// Check a declaration file and register it in the manifest: its component (sharing the
    /// declared-tool `.wasm`), routes, variables and `tool_registry` entry.
    Add(AddArgs),
}

#[derive(Args)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    app: AppArgs,
    /// Declaration files (TOML); running tools, by the base URL of their contract
    /// (`https://tools.example.com/internal/tools/gmail`); or, with --through, component ids of
    /// that application. None checks the manifest's declared tools. The kit signs its requests
    /// with GATEHOUSE_CONTRACT_SECRET when it is set.
    targets: Vec<String>,
    /// A Gatehouse application the tools are registered in (`http://127.0.0.1:3000`): the kit
    /// makes real calls through it, for a tool that keeps its calls in Gatehouse's database. Its
    /// API token is GATEHOUSE_TOKEN.
    #[arg(long)]
    through: Option<String>,
    /// With --through, the function name the tool is registered under (its described name by
    /// default).
    #[arg(long)]
    function: Option<String>,
    /// Parameters the tool accepts, as a JSON object (the first of its schema's `examples` by
    /// default). `execute` really runs once with them: point the tool at a test backend.
    #[arg(long)]
    example: Option<String>,
    /// How long any answer may take, in milliseconds; a slower one is cut and fails its rule.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Check the backend each declaration file's requests go to: the kit sends them signed with
    /// the tool's `<name>_signing_secret`, and unsigned, wrongly signed, replayed and aimed at
    /// another target, which the backend must refuse. `prepare` (or `execute`) really runs.
    #[arg(long)]
    backend: bool,
    /// With --backend, a Spin variable the declaration reads, or its signing secret, as
    /// `gatehouse up` takes one (`--variable reservations_url=http://127.0.0.1:8000`); a variable
    /// not given is read from SPIN_VARIABLE_<NAME>, the better place for a secret. Repeatable.
    #[arg(long = "variable", visible_alias = "var", value_name = "NAME=VALUE", requires = "backend")]
    variables: Vec<String>,
}

/// What one argument of `tools check` names.
enum CheckTarget {
    Declaration(PathBuf),
    /// A contract's base URL.
    Running(String),
}

impl CheckArgs {
    fn target(&self, argument: &str) -> CheckTarget {
        if argument.starts_with("http://") || argument.starts_with("https://") {
            return CheckTarget::Running(argument.trim_end_matches('/').to_owned());
        }
        match &self.through {
            Some(app) if !argument.contains(['/', '.']) => {
                CheckTarget::Running(gatehouse_domain::contract::tool_host_url(app, argument))
            }
            _ => CheckTarget::Declaration(PathBuf::from(argument)),
        }
    }

    fn example(&self) -> Result<Option<serde_json::Map<String, serde_json::Value>>> {
        match &self.example {
            None => Ok(None),
            Some(text) => {
                Ok(Some(serde_json::from_str(text).context("--example must be a JSON object of parameters")?))
            }
        }
    }

    fn kit(&self, base_url: String) -> Result<gatehouse_conformance::Kit> {
        let example = self.example()?;
        let through = match &self.through {
            None => None,
            Some(app) => Some(gatehouse_conformance::Lifecycle {
                base_url: app.clone(),
                token: std::env::var("GATEHOUSE_TOKEN")
                    .context("--through needs the application's API token in GATEHOUSE_TOKEN")?,
                function: self.function.clone(),
            }),
        };
        Ok(gatehouse_conformance::Kit {
            base_url,
            secret: std::env::var("GATEHOUSE_CONTRACT_SECRET").ok(),
            timeout: std::time::Duration::from_millis(self.timeout_ms),
            example,
            through,
        })
    }
}

#[derive(Args)]
pub(crate) struct AddArgs {
    #[command(flatten)]
    app: AppArgs,
    /// The declaration file, inside the manifest's folder (`tools/book_table.toml`).
    file: PathBuf,
}

pub(crate) async fn run(command: ToolsCommand) -> Result<()> {
    match command {
        ToolsCommand::Check(args) if args.targets.is_empty() && args.backend => {
            bail!("--backend checks the backends of the declaration files named: name at least one")
        }
        ToolsCommand::Check(args) if args.targets.is_empty() => {
            let manifest_path = args.app.manifest_path()?;
            let checked = check_manifest(&manifest_path)?;
            println!("{} declared tool(s) in {}: all valid", checked, manifest_path.display());
            Ok(())
        }
        ToolsCommand::Check(args) => {
            let mut failed = false;
            for argument in &args.targets {
                match args.target(argument) {
                    CheckTarget::Declaration(file) if args.backend => match read_declaration(&file) {
                        Ok(declared) => match check_backend(&args, &declared).await {
                            Ok(report) => {
                                println!("{report}");
                                failed |= !report.passed();
                            }
                            Err(error) => {
                                failed = true;
                                eprintln!("{}: {error:#}", file.display());
                            }
                        },
                        Err(error) => {
                            failed = true;
                            eprintln!("{error:#}");
                        }
                    },
                    CheckTarget::Running(base_url) if args.backend => {
                        failed = true;
                        eprintln!("{base_url}: --backend checks the backend a declaration file names; give the file");
                    }
                    CheckTarget::Declaration(file) => match read_declaration(&file) {
                        Ok(declared) => println!("{}: {} is valid", file.display(), declared.declaration().name),
                        Err(error) => {
                            failed = true;
                            eprintln!("{error:#}");
                        }
                    },
                    CheckTarget::Running(base_url) => {
                        let report = gatehouse_conformance::run(&args.kit(base_url)?).await?;
                        println!("{report}");
                        failed |= !report.passed();
                    }
                }
            }
            if failed {
                bail!("some tools do not keep the contract");
            }
            Ok(())
        }
        ToolsCommand::Add(args) => add(&args),
    }
}

/// Runs the kit's backend rules against the backend `declared` names, with the variables it
/// reads and its signing secret taken as `gatehouse up` takes them: `--variable`, then
/// `SPIN_VARIABLE_<NAME>`.
async fn check_backend(args: &CheckArgs, declared: &Declared) -> Result<gatehouse_conformance::Report> {
    let mut sources = VariableSources::from_process_env();
    for flag in &args.variables {
        sources.add_flag(flag)?;
    }
    let signing = declared.signing_secret_variable();
    let mut variables = BTreeMap::new();
    let mut missing = Vec::new();
    for name in declared.variables().into_iter().chain([signing.clone()]) {
        match sources.lookup(&name) {
            Some(value) => {
                variables.insert(name, value.clone());
            }
            None => missing.push(VariableError::MissingRequired { name }.to_string()),
        }
    }
    if !missing.is_empty() {
        bail!("{}", missing.join("; "));
    }
    let signing_secret = variables.remove(&signing).unwrap_or_default();
    let backend =
        gatehouse_conformance::backend::Backend { declared, variables, signing_secret, example: args.example()? };
    Ok(gatehouse_conformance::backend::run(&backend).await?)
}

/// Reads and checks one declaration file; the error names the file and every problem.
fn read_declaration(file: &Path) -> Result<Declared> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    Declared::parse(&text).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("{}: {p}", file.display())).collect();
        anyhow::anyhow!(lines.join("\n"))
    })
}

/// Checks every declared tool of the manifest at `manifest_path`: its declaration, that the
/// component may reach the backend, and that it gives every variable the declaration reads.
/// Answers how many there are.
pub(crate) fn check_manifest(manifest_path: &Path) -> Result<usize> {
    let manifest = Manifest::load(manifest_path)?;
    let manifest_dir = manifest_path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut problems = Vec::new();
    let mut count = 0;
    for (id, component) in &manifest.component {
        let Some(guest_path) = component.variables.get(DECLARATION_VARIABLE) else { continue };
        count += 1;
        let root = component.files_root.clone().unwrap_or_else(|| manifest_dir.clone());
        let Some(file) = host_file(component, &root, guest_path) else {
            problems.push(format!("component '{id}': its declaration {guest_path} is not among the component's files"));
            continue;
        };
        let declared = match read_declaration(&file) {
            Ok(declared) => declared,
            Err(error) => {
                problems.push(format!("component '{id}': {error:#}"));
                continue;
            }
        };
        let origin = declared.origin().allowed_outbound_host();
        if !component.allowed_outbound_hosts.contains(&origin) {
            problems.push(format!(
                "component '{id}': {}: backend.url: the component's allowed_outbound_hosts does not name {origin}",
                file.display()
            ));
        }
        for variable in declared.variables() {
            if !component.variables.contains_key(&variable) {
                problems.push(format!(
                    "component '{id}': {}: the declaration reads the variable {variable}, which the component's \
                     [variables] does not give",
                    file.display()
                ));
            }
        }
    }
    if !problems.is_empty() {
        bail!("declared tools that cannot start:\n{}", problems.join("\n"));
    }
    Ok(count)
}

/// The host file a component sees at `guest_path`, through its `files`.
fn host_file(component: &ComponentDecl, root: &Path, guest_path: &str) -> Option<PathBuf> {
    component.files.iter().find_map(|mount| match mount {
        FileMount::Directory { source, destination } => {
            let rest = guest_path.strip_prefix(destination.trim_end_matches('/'))?.strip_prefix('/')?;
            Some(root.join(source).join(rest)).filter(|file| file.is_file())
        }
        FileMount::Pattern(pattern) => {
            let relative = guest_path.strip_prefix('/')?;
            let matches = glob::Pattern::new(pattern).is_ok_and(|p| p.matches(relative));
            Some(root.join(relative)).filter(|file| matches && file.is_file())
        }
    })
}

fn add(args: &AddArgs) -> Result<()> {
    let manifest_path = args.app.manifest_path()?;
    let declared = read_declaration(&args.file)?;
    let declaration = declared.declaration();
    let name = declaration.name.clone();
    let id = name.replace('_', "-");
    let mut registration = Registration::open(&manifest_path, &id)?;
    let relative = registration.relative(&args.file)?;

    let signing = declared.signing_secret_variable();
    registration.declare(&signing, Variable::Required { secret: true });
    for variable in declared.variables() {
        let origin = matches!(declared.origin(), Origin::Variable(held) if *held == variable);
        registration.declare(&variable, Variable::Required { secret: !origin });
    }
    let mut names = vec![name.clone()];
    names.extend(declaration.aliases.iter().cloned());
    registration.register(&names, &id)?;

    let mut component = Table::new();
    component["source"] = value(DECLARED_TOOL_SOURCE);
    component["files"] = value(Array::from_iter([relative.as_str()]));
    component["allowed_outbound_hosts"] =
        value(Array::from_iter(["postgres://{{ db_host }}".to_owned(), declared.origin().allowed_outbound_host()]));
    let mut component_variables = Table::new();
    component_variables[DECLARATION_VARIABLE] = value(format!("/{relative}"));
    component_variables["db_url"] = value("{{ db_url }}");
    component_variables["contract_secret"] = value("{{ contract_secret }}");
    component_variables["signing_secret"] = value(format!("{{{{ {signing} }}}}"));
    for variable in declared.variables() {
        component_variables[variable.as_str()] = value(format!("{{{{ {variable} }}}}"));
    }
    component["variables"] = Item::Table(component_variables);
    let mut build = Table::new();
    build["command"] = value("cargo build --target wasm32-wasip2 --release -p declared-tool");
    component["build"] = Item::Table(build);
    registration.add_component(&id, component)?;
    registration.save()?;

    println!("added {name} as component '{id}' to {}", manifest_path.display());
    let mut to_set: Vec<String> = declared.variables().into_iter().collect();
    to_set.push(signing);
    let settings: Vec<String> = to_set.iter().map(|v| format!("SPIN_VARIABLE_{}", v.to_ascii_uppercase())).collect();
    println!("set {} before `gatehouse up`", settings.join(", "));
    Ok(())
}
