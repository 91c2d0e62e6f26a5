//! A tool declared without code (docs/tools.md, "A declared tool"; docs/architecture.md,
//! "Declared tools").
//!
//! A declaration is a TOML file: the tool's name and description, a JSON Schema for its
//! parameters, the sentence that asks for confirmation, and the HTTP requests to the team's
//! backend that `prepare`, `execute` and `discard` make, with templates over the parameters and
//! the backend's answers. [`Declared::parse`] checks all of it at once and names every problem
//! by its field; the generic tool component (`components/declared-tool`) then serves the tool
//! contract from it, and `gatehouse tools` checks a file before it is added to `spin.toml`.
//!
//! This crate does no I/O: it turns a declaration and a call into the requests to send and the
//! backend's answers into the call's outcome. Sending, retrying and recording are the
//! component's (`gatehouse-declared-tool`).

mod check;
mod model;
mod origin;
mod parameters;
mod request;
pub mod template;

use std::collections::BTreeSet;

use gatehouse_domain::FieldProblem;
use gatehouse_domain::contract::{Executed, ToolDescription};
use serde_json::{Map, Value};

pub use check::{MAX_TIMEOUT_MS, Problem, RESERVED_HEADERS};
pub use model::{Answer, Backend, Declaration, HttpMethod, Step};
pub use origin::Origin;
pub use request::{BackendRequest, Inputs, StepKind, idempotency_key};
use template::TemplateError;

/// A declaration that passed every check, ready to serve.
#[derive(Debug)]
pub struct Declared {
    declaration: Declaration,
    origin: Origin,
    parameters: jsonschema::Validator,
}

impl Declared {
    /// Reads and checks a declaration file's text; every problem found, each with its field.
    pub fn parse(text: &str) -> Result<Declared, Vec<Problem>> {
        let declaration: Declaration = toml::from_str(text).map_err(|error| vec![toml_problem(&error, text)])?;
        Declared::check(declaration)
    }

    /// Checks a declaration read some other way.
    pub fn check(declaration: Declaration) -> Result<Declared, Vec<Problem>> {
        let problems = check::problems(&declaration);
        if !problems.is_empty() {
            return Err(problems);
        }
        let origin = Origin::parse(&declaration.backend.url)
            .map_err(|p| vec![Problem { field: "backend.url".into(), problem: p }])?;
        let parameters = parameters::validator(&declaration.parameters)
            .map_err(|problem| vec![Problem { field: "parameters".into(), problem }])?;
        Ok(Declared { declaration, origin, parameters })
    }

    pub fn declaration(&self) -> &Declaration {
        &self.declaration
    }

    /// Where the backend is: a literal origin, or the Spin variable that holds it.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// What `describe` answers (the component fills in its version).
    pub fn description(&self) -> ToolDescription {
        let declaration = &self.declaration;
        ToolDescription {
            name: declaration.name.clone(),
            aliases: declaration.aliases.clone(),
            description: declaration.description.clone(),
            parameters_schema: declaration.parameters.clone(),
            needs_checkpoint: declaration.prepare.is_some(),
            version: String::new(),
            effects: declaration.effects,
        }
    }

    /// The parameters as the schema accepts them, or every problem in words an agent can speak.
    pub fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
        parameters::validate(&self.parameters, parameters)
    }

    /// The sentence that asks the caller to confirm.
    pub fn summarize(&self, parameters: &Map<String, Value>) -> Result<String, TemplateError> {
        template::render_text(&self.declaration.confirm, &Inputs::only_parameters(parameters).scope())
    }

    /// The step `kind` as a request, or `None` when the declaration has no such step.
    pub fn request(&self, kind: StepKind, inputs: &Inputs) -> Result<Option<BackendRequest>, TemplateError> {
        let step = match kind {
            StepKind::Prepare => self.declaration.prepare.as_ref(),
            StepKind::Execute => Some(&self.declaration.execute),
            StepKind::Discard => self.declaration.discard.as_ref(),
        };
        step.map(|step| request::build(&self.declaration.name, kind, step, inputs)).transpose()
    }

    /// What the agent says at the checkpoint, once `prepare` answered `prepared`.
    pub fn checkpoint_message(&self, inputs: &Inputs) -> Result<String, TemplateError> {
        match &self.declaration.checkpoint {
            Some(template) => template::render_text(template, &inputs.scope()),
            None => Ok("It's ready. Shall I go ahead?".to_owned()),
        }
    }

    /// The call's outcome from the backend's answer to `execute` (in `inputs.response`).
    pub fn answer(&self, inputs: &Inputs) -> Result<Executed, TemplateError> {
        let scope = inputs.scope();
        let answer = &self.declaration.answer;
        let result = match &answer.result {
            Some(template) => template::render_json(template, &scope)?,
            None => inputs.response.clone().unwrap_or(Value::Null),
        };
        Ok(Executed { result, voice_response: template::render_text(&answer.voice_response, &scope)? })
    }

    /// The Spin variable that holds the tool's signing secret (`book_table_signing_secret`):
    /// `gatehouse tools add` declares it, and the kit signs with it as the component does.
    pub fn signing_secret_variable(&self) -> String {
        format!("{}_signing_secret", self.declaration.name)
    }

    /// The Spin variables the templates read (`vars.*` and `secrets.*`), and the one that holds
    /// the backend's origin: the component's `[variables]` must give each a value.
    pub fn variables(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        if let Origin::Variable(name) = &self.origin {
            names.insert(name.clone());
        }
        let declaration = &self.declaration;
        let steps = [declaration.prepare.as_ref(), Some(&declaration.execute), declaration.discard.as_ref()];
        for step in steps.into_iter().flatten() {
            let mut texts: Vec<&str> = vec![step.path.as_str()];
            texts.extend(step.headers.values().map(String::as_str));
            for text in texts {
                names.extend(spin_variables(template::variables(text).unwrap_or_default()));
            }
            if let Some(body) = &step.body {
                for (_, found) in template::json_variables(body, "body") {
                    names.extend(spin_variables(found.unwrap_or_default()));
                }
            }
        }
        names
    }
}

fn spin_variables(names: BTreeSet<String>) -> impl Iterator<Item = String> {
    names.into_iter().filter_map(|name| {
        let (root, key) = name.split_once('.')?;
        matches!(root, "vars" | "secrets").then(|| key.split('.').next().unwrap_or(key).to_owned())
    })
}

/// A TOML error as a problem at its line (the message names an unknown or missing field).
fn toml_problem(error: &toml::de::Error, text: &str) -> Problem {
    let line = error.span().map_or(0, |span| text[..span.start.min(text.len())].matches('\n').count() + 1);
    Problem { field: format!("line {line}"), problem: error.message().trim().to_owned() }
}

#[cfg(test)]
mod tests;
