//! A declared tool on the tool contract (docs/architecture.md, "Declared tools").
//!
//! [`DeclaredTool`] reads its declaration from the file the component's `declaration` variable
//! names (mounted with the component's `files`, as Spin mounts them) and serves `describe`, `validate` and `summarize` from it; `prepare`, `execute` and `discard`
//! become requests to the team's backend ([`backend`]), each with an `Idempotency-Key` for the
//! call and the operation and an `X-Gatehouse-Signature` made with the tool's
//! `signing_secret`. A request is sent again only where that cannot do the action twice.

mod backend;

use gatehouse_declaration::{Declared, Inputs, Problem, StepKind};
use gatehouse_domain::contract::{Checkpoint, Executed, ToolDescription, ToolRequest};
use gatehouse_domain::{ApiError, ErrorCode, FieldProblem};
use gatehouse_tool::{Tool, ToolFailure};
use serde_json::{Map, Value, json};
use spin_sdk::variables;

use crate::backend::{Answered, Backend};

/// The Spin variable that names the declaration file, as the component sees it
/// (`/tools/book_table.toml`). The text itself cannot be a variable: Spin would read its
/// `{{ ... }}` as references to other variables.
pub const DECLARATION_VARIABLE: &str = "declaration";
/// The Spin variable that holds the secret the backend requests are signed with.
pub const SIGNING_SECRET_VARIABLE: &str = "signing_secret";

/// Why the component cannot serve its tool. The runner refuses such a declaration before it
/// starts; under `spin up` this is where it shows.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("reading the {DECLARATION_VARIABLE} variable: {0}")]
    Variable(String),
    #[error("reading the declaration {path}: {error} (is it in the component's files?)")]
    File { path: String, error: std::io::Error },
    #[error("the declaration is not valid: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
}

impl From<LoadError> for ApiError {
    fn from(error: LoadError) -> ApiError {
        gatehouse_platform::log_line("error", &error.to_string());
        let mut answer =
            ApiError::new(ErrorCode::Internal, "This tool's declaration is not valid; the server log says why.");
        answer.detail = Some(error.to_string());
        answer
    }
}

/// The tool a declaration describes.
pub struct DeclaredTool {
    declared: Declared,
}

impl DeclaredTool {
    /// The declaration of this component, checked.
    pub fn load() -> Result<DeclaredTool, LoadError> {
        let path = variables::get(DECLARATION_VARIABLE).map_err(|e| LoadError::Variable(format!("{e:?}")))?;
        let text = std::fs::read_to_string(&path).map_err(|error| LoadError::File { path, error })?;
        Declared::parse(&text).map(|declared| DeclaredTool { declared }).map_err(LoadError::Invalid)
    }

    /// What the templates of one operation of one call may read.
    fn inputs(&self, request: &ToolRequest, backend: &Backend) -> Inputs {
        Inputs {
            parameters: request.parameters.clone(),
            prepared: request.checkpoint.as_ref().and_then(|checkpoint| checkpoint.state.get("prepared").cloned()),
            response: None,
            tool_call_id: request.tool_call_id.as_ref().map(ToString::to_string),
            session_id: request.session_id.as_ref().map(ToString::to_string),
            vars: backend.variables.clone(),
            secrets: backend.variables.clone(),
        }
    }

    /// Sends step `kind` and reads its answer as JSON.
    async fn run(&self, kind: StepKind, request: &ToolRequest) -> Result<Option<(Inputs, Value)>, ToolFailure> {
        let backend = Backend::configure(&self.declared)?;
        let inputs = self.inputs(request, &backend);
        let built = self.declared.request(kind, &inputs).map_err(|e| {
            gatehouse_platform::log_line(
                "error",
                &format!("{} {}: {e}", self.declared.declaration().name, kind.as_str()),
            );
            ToolFailure::new("I couldn't put that request together for the service, so nothing was sent.")
        })?;
        let Some(built) = built else { return Ok(None) };
        match backend.send(kind, built, request.side_effect_may_have_started).await? {
            Answered::Json(value) => Ok(Some((inputs, value))),
            Answered::Gone => Ok(Some((inputs, Value::Null))),
        }
    }
}

impl Tool for DeclaredTool {
    fn describe(&self) -> ToolDescription {
        self.declared.description()
    }

    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>> {
        self.declared.validate(parameters)
    }

    fn summarize(&self, parameters: &Map<String, Value>) -> String {
        self.declared.summarize(parameters).unwrap_or_else(|e| {
            gatehouse_platform::log_line("warn", &format!("the confirm template: {e}"));
            format!("Shall I go ahead with {}?", self.declared.declaration().name.replace('_', " "))
        })
    }

    async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure> {
        let Some((inputs, prepared)) = self.run(StepKind::Prepare, request).await? else { return Ok(None) };
        let inputs = Inputs { prepared: Some(prepared.clone()), ..inputs };
        let message = self.declared.checkpoint_message(&inputs).map_err(|e| {
            gatehouse_platform::log_line("error", &format!("the checkpoint template: {e}"));
            ToolFailure::new("The service answered in a way I couldn't read, so I've stopped here.")
        })?;
        Ok(Some(Checkpoint { message, state: json!({ "prepared": prepared }) }))
    }

    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure> {
        let Some((inputs, response)) = self.run(StepKind::Execute, request).await? else {
            return Err(ToolFailure::new("This tool has nothing to run."));
        };
        let inputs = Inputs { response: Some(response.clone()), ..inputs };
        // The action is done whatever happens next: an answer the templates cannot read still
        // completes the call, with the backend's own answer as its result.
        Ok(self.declared.answer(&inputs).unwrap_or_else(|e| {
            gatehouse_platform::log_line("warn", &format!("the answer templates: {e}"));
            Executed { result: response, voice_response: "It's done.".to_owned() }
        }))
    }

    async fn discard(&self, request: &ToolRequest) -> Result<(), ToolFailure> {
        self.run(StepKind::Discard, request).await.map(|_| ())
    }
}
