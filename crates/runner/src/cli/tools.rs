//! `gatehouse tools check` and `gatehouse tools add`: declared tools (docs/tools.md, "A declared
//! tool"), checked before anything starts and registered in one step; and the conformance kit,
//! which checks a running tool against the tool contract (docs/tools.md, "Checking a tool").
//!
//! A declared tool is a component of spin.toml whose `declaration` variable names its
//! declaration file, mounted with the component's `files`. `add` writes that component, its
//! routes, its variables and its registry entry into spin.toml, so spin.toml stays the one
//! description of what runs; `up` checks every declared tool of the manifest before it starts.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use gatehouse_declaration::{Declared, Origin};
use gatehouse_spin_host::manifest::{ComponentDecl, FileMount, Manifest};
use toml_edit::{Array, DocumentMut, InlineTable, Item, Table, value};

use super::AppArgs;

/// The variable of a declared tool's component that names its declaration file.
const DECLARATION_VARIABLE: &str = "declaration";
/// Where the generic component is built (`components/declared-tool`).
const DECLARED_TOOL_SOURCE: &str = "target/wasm32-wasip2/release/declared_tool.wasm";

#[derive(Subcommand)]
pub(crate) enum ToolsCommand {
    /// Check declaration files (each problem as `FILE: FIELD: WHAT IS WRONG`), or with none
    /// every declared tool of the manifest; or run the conformance kit against running tools,
    /// named by their contract's base URL, and print each rule's verdict.
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
                CheckTarget::Running(format!("{}/internal/tools/{argument}", app.trim_end_matches('/')))
            }
            _ => CheckTarget::Declaration(PathBuf::from(argument)),
        }
    }

    fn kit(&self, base_url: String) -> Result<gatehouse_conformance::Kit> {
        let example = match &self.example {
            None => None,
            Some(text) => Some(
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(text)
                    .context("--example must be a JSON object of parameters")?,
            ),
        };
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
    let manifest_dir = manifest_path.parent().map(Path::to_path_buf).unwrap_or_default();
    let file = std::path::absolute(&args.file)?;
    let relative = file
        .strip_prefix(&manifest_dir)
        .with_context(|| format!("{} must be inside the manifest's folder {}", file.display(), manifest_dir.display()))?
        .to_string_lossy()
        .replace('\\', "/");
    let declared = read_declaration(&file)?;
    let name = declared.declaration().name.clone();
    let id = name.replace('_', "-");

    let text =
        std::fs::read_to_string(&manifest_path).with_context(|| format!("reading {}", manifest_path.display()))?;
    let mut document: DocumentMut = text.parse().with_context(|| format!("parsing {}", manifest_path.display()))?;
    if document.get("component").and_then(|c| c.get(&id)).is_some() {
        bail!("{} already has a component '{id}'", manifest_path.display());
    }

    let signing = format!("{name}_signing_secret");
    let variables = document["variables"].or_insert(Item::Table(Table::new()));
    let mut declare = |variable: &str, secret: bool| {
        if variables.get(variable).is_none() {
            let mut spec = InlineTable::new();
            spec.insert("required", true.into());
            if secret {
                spec.insert("secret", true.into());
            }
            variables[variable] = value(spec);
        }
    };
    declare(&signing, true);
    for variable in declared.variables() {
        let origin = matches!(declared.origin(), Origin::Variable(held) if *held == variable);
        declare(&variable, !origin);
    }
    register(&mut document, &declared, &id)?;

    let triggers = document["trigger"]["http"].or_insert(Item::ArrayOfTables(Default::default()));
    let triggers = triggers.as_array_of_tables_mut().context("[[trigger.http]] is not an array of tables")?;
    let mut private = Table::new();
    private["route"] = value({
        let mut route = InlineTable::new();
        route.insert("private", true.into());
        route
    });
    private["component"] = value(&id);
    triggers.push(private);
    let mut signed = Table::new();
    signed["route"] = value(format!("/internal/tools/{id}/..."));
    signed["component"] = value(&id);
    triggers.push(signed);

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
    let components = document["component"].or_insert(Item::Table(Table::new()));
    components.as_table_mut().context("[component] is not a table")?.set_implicit(true);
    components[id.as_str()] = Item::Table(component);

    std::fs::write(&manifest_path, document.to_string())
        .with_context(|| format!("writing {}", manifest_path.display()))?;
    println!("added {name} as component '{id}' to {}", manifest_path.display());
    let mut to_set: Vec<String> = declared.variables().into_iter().collect();
    to_set.push(signing);
    let settings: Vec<String> = to_set.iter().map(|v| format!("SPIN_VARIABLE_{}", v.to_ascii_uppercase())).collect();
    println!("set {} before `gatehouse up`", settings.join(", "));
    Ok(())
}

/// Adds `name` (and its aliases) for component `id` to the default of `tool_registry`.
fn register(document: &mut DocumentMut, declared: &Declared, id: &str) -> Result<()> {
    let declaration = declared.declaration();
    let mut names = vec![declaration.name.clone()];
    names.extend(declaration.aliases.iter().cloned());
    let entry = format!("{}={id}", names.join("|"));
    let registry = document
        .get_mut("variables")
        .and_then(|v| v.get_mut("tool_registry"))
        .and_then(|r| r.as_inline_table_mut())
        .context("spin.toml has no tool_registry = { default = \"...\" } variable")?;
    let current = registry.get("default").and_then(|d| d.as_str()).unwrap_or_default().to_owned();
    let listed =
        current.split(',').any(|e| e.split('=').next().is_some_and(|n| n.split('|').any(|n| n == declaration.name)));
    if listed {
        bail!("tool_registry already names {}", declaration.name);
    }
    let updated = if current.trim().is_empty() { entry } else { format!("{current},{entry}") };
    registry.insert("default", updated.into());
    Ok(())
}
