use std::time::{Instant, SystemTime, UNIX_EPOCH};

use gatehouse_domain::contract::{
    Checkpoint, Executed, Operation, Prepared, Summary, ToolDescription, ToolRefusal, ToolRequest, Validated,
};
use gatehouse_domain::{ApiError, FieldProblem, SessionId};
use gatehouse_http::{IncomingRequest, Reply, Request, ResponseOutparam};
use serde_json::{Map, Value};

/// A failure the tool reports as a definitive answer: the call becomes FAILED with this
/// sentence, which the agent can speak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    pub message: String,
}

impl ToolFailure {
    pub fn new(message: impl Into<String>) -> ToolFailure {
        ToolFailure { message: message.into() }
    }
}

/// What a tool component implements. The lifecycle reaches it only through these operations.
#[allow(async_fn_in_trait)] // components are single-threaded; no Send bound is wanted
pub trait Tool {
    fn describe(&self) -> ToolDescription;
    /// The normalized parameters, or every problem found.
    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>>;
    /// Checks that need stored state rather than the parameters alone, such as a session-context
    /// key the parameters refer to. Runs after `validate` accepted the parameters.
    fn check_references(&self, _parameters: &Map<String, Value>, _session: Option<&SessionId>) -> Vec<FieldProblem> {
        Vec::new()
    }
    /// The sentence the agent speaks to have the caller confirm.
    fn summarize(&self, parameters: &Map<String, Value>) -> String;
    /// Everything up to the irreversible step. `None` for a tool that needs no checkpoint.
    async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure>;
    /// The irreversible step, once. With `side_effect_may_have_started`, find out first.
    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure>;
    /// Undo what `prepare` left behind.
    async fn discard(&self, request: &ToolRequest) -> Result<(), ToolFailure>;
}

/// Serves a tool component that also has a public route of its own (a gated direct flow):
/// requests for `public_path` go to `handler`, everything else to the contract.
pub async fn serve_tool_with_route<T, F, Fut>(
    req: IncomingRequest,
    out: ResponseOutparam,
    tool: &T,
    public_path: &str,
    handler: F,
) where
    T: Tool,
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Result<Reply, ApiError>>,
{
    if req.path_with_query().is_some_and(|path| path.split('?').next() == Some(public_path)) {
        gatehouse_http::serve(req, out, handler).await
    } else {
        serve_tool(req, out, tool).await
    }
}

/// Serves the contract at `/tool/<operation>` (any other path is a 404), then records the
/// operation in `tool_executions`.
pub async fn serve_tool<T: Tool>(req: IncomingRequest, out: ResponseOutparam, tool: &T) {
    gatehouse_http::serve(req, out, |req| handle(req, tool)).await
}

async fn handle<T: Tool>(req: Request, tool: &T) -> Result<Reply, ApiError> {
    let path = req.path().to_owned();
    let op = path
        .rsplit('/')
        .next()
        .and_then(Operation::parse)
        .filter(|_| path.contains("/tool/"))
        .ok_or_else(|| ApiError::not_found("This tool has no such operation."))?;
    let description = tool.describe();
    if op == Operation::Describe {
        return Ok(gatehouse_http::json_response(200, &description).into());
    }
    gatehouse_http::require_method(&req, gatehouse_http::Method::Post)?;
    let request: ToolRequest = gatehouse_http::read_json(&req)?;

    let started_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default();
    let clock = Instant::now();
    let outcome = run(tool, op, &request).await;
    let duration_ms = clock.elapsed().as_secs_f64() * 1000.0;

    let (response, outcome_name, error) = match outcome {
        Ok(body) => (gatehouse_http::json_response(200, &body), "ok", None),
        Err(refusal) => {
            let name = if op == Operation::Validate { "rejected" } else { "failed" };
            let error = Some(refusal.error.clone());
            (gatehouse_http::json_response(422, &refusal), name, error)
        }
    };
    let record = Record {
        tool: description.name,
        component: component_id(&req),
        version: description.version,
        op,
        tool_call_id: request.tool_call_id.map(String::from),
        started_at,
        duration_ms,
        outcome: outcome_name,
        error,
    };
    Ok(Reply::from(response).then(async move { record.write() }))
}

async fn run<T: Tool>(tool: &T, op: Operation, request: &ToolRequest) -> Result<Value, ToolRefusal> {
    let failed = |f: ToolFailure| ToolRefusal { error: f.message, fields: Vec::new() };
    let to_value = |v: Result<Value, serde_json::Error>| v.map_err(|e| ToolRefusal { error: e.to_string(), fields: vec![] });
    match op {
        Operation::Describe => to_value(serde_json::to_value(tool.describe())),
        Operation::Validate => match tool.validate(request.parameters.clone()).and_then(|parameters| {
            let problems = tool.check_references(&parameters, request.session_id.as_ref());
            if problems.is_empty() { Ok(parameters) } else { Err(problems) }
        }) {
            Ok(parameters) => {
                let summary = tool.summarize(&parameters);
                to_value(serde_json::to_value(Validated { parameters, summary }))
            }
            Err(fields) => Err(ToolRefusal { error: "Some of the details aren't valid.".into(), fields }),
        },
        Operation::Summarize => to_value(serde_json::to_value(Summary { summary: tool.summarize(&request.parameters) })),
        Operation::Prepare => {
            let checkpoint = tool.prepare(request).await.map_err(failed)?;
            to_value(serde_json::to_value(Prepared { checkpoint }))
        }
        Operation::Execute => to_value(serde_json::to_value(tool.execute(request).await.map_err(failed)?)),
        Operation::Discard => {
            tool.discard(request).await.map_err(failed)?;
            Ok(serde_json::json!({"discarded": true}))
        }
    }
}

/// The component id: the contract is only reachable through service chaining, so the host
/// of the request is `<component id>.spin.internal`.
fn component_id(req: &Request) -> String {
    gatehouse_http::header(req, "spin-full-url").and_then(host_component).unwrap_or_else(|| "unknown".into())
}

fn host_component(url: &str) -> Option<String> {
    let host = url.split("://").nth(1)?.split(['/', ':']).next()?;
    host.strip_suffix(".spin.internal").map(str::to_owned)
}

struct Record {
    tool: String,
    component: String,
    version: String,
    op: Operation,
    tool_call_id: Option<String>,
    started_at: f64,
    duration_ms: f64,
    outcome: &'static str,
    error: Option<String>,
}

impl Record {
    /// Runs after the answer has gone out. A failure here is logged and goes no further:
    /// the history must never fail the call it records.
    fn write(self) {
        let written = gatehouse_http::open_db().and_then(|db| {
            gatehouse_store::record_tool_execution(
                &db,
                &gatehouse_store::ToolExecution {
                    tool: &self.tool,
                    component: &self.component,
                    component_version: &self.version,
                    operation: self.op.as_str(),
                    tool_call_id: self.tool_call_id.as_deref(),
                    started_at: self.started_at,
                    duration_ms: self.duration_ms,
                    outcome: self.outcome,
                    error: self.error.as_deref(),
                },
            )
            .map_err(ApiError::from)
        });
        if let Err(error) = written {
            gatehouse_http::log_line("warn", &format!("recording a tool execution: {}", error.detail.unwrap_or(error.message)));
        }
    }
}
