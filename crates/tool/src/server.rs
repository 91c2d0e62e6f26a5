use gatehouse_domain::contract::{
    self as contract, Checkpoint, Discarded, Executed, Operation, Prepared, Summary, ToolDescription, ToolRefusal,
    ToolRequest, Validated,
};
use gatehouse_domain::{ApiError, FieldProblem, SessionOf};
use gatehouse_http::{Access, Component, IncomingRequest, Params, Reply, Request, ResponseOutparam, Router};
use serde_json::{Map, Value};

use crate::guard::Guarded;
use crate::history::{Execution, Outcome, ToolIdentity};

/// A failure the tool reports: the call becomes FAILED with this sentence, which the agent can
/// speak; or, for [`ToolFailure::ask_again_later`], the operation is tried again later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The sentence the agent speaks.
    pub message: String,
    /// What the failure says about the world.
    pub kind: FailureKind,
}

/// What a [`ToolFailure`] says about the world (docs/architecture.md, "Exactly once").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Nothing was done: the call fails and what `prepare` left is released.
    NotDone,
    /// It may have been done, and cannot be found out: the call fails, nothing is released.
    MayHaveActed,
    /// It may have been done, and asking again later finds out without acting twice (a backend
    /// that honours the call's Idempotency-Key): the contract answers 503, so the lifecycle
    /// re-drives the operation after a back-off, up to its attempt limit.
    AskAgainLater,
}

/// How long a tool that answers [`FailureKind::AskAgainLater`] asks to be left alone.
const ASK_AGAIN_AFTER_SECONDS: u32 = 5;

impl ToolFailure {
    /// A definite failure saying `message`: nothing was done.
    pub fn new(message: impl Into<String>) -> ToolFailure {
        ToolFailure { message: message.into(), kind: FailureKind::NotDone }
    }

    /// A failure after which the tool cannot tell whether it acted.
    pub fn may_have_acted(message: impl Into<String>) -> ToolFailure {
        ToolFailure { message: message.into(), kind: FailureKind::MayHaveActed }
    }

    /// An outcome not known yet, that asking again will find out.
    pub fn ask_again_later(message: impl Into<String>) -> ToolFailure {
        ToolFailure { message: message.into(), kind: FailureKind::AskAgainLater }
    }

    /// The failure as the contract's refusal (for the kinds that end the call).
    pub fn refusal(&self) -> ToolRefusal {
        ToolRefusal { may_have_acted: self.kind == FailureKind::MayHaveActed, ..ToolRefusal::saying(&self.message) }
    }

    /// The failure as its caller in the same process reads it: what the contract's answer to
    /// it would have been (a 422, or a crash to try again).
    pub fn into_error(self) -> crate::ToolError {
        match self.kind {
            FailureKind::AskAgainLater => crate::ToolError::Crashed(gatehouse_domain::contract::ToolFault::new(
                gatehouse_domain::contract::FaultKind::ErrorStatus,
                self.message,
            )),
            FailureKind::NotDone | FailureKind::MayHaveActed => crate::ToolError::Refused(self.refusal()),
        }
    }
}

/// What a tool component implements. The lifecycle reaches it only through these operations.
#[allow(async_fn_in_trait)] // components are single-threaded; no Send bound is wanted
pub trait Tool {
    /// What the tool is; `version` is left empty, since the server fills in the component's.
    fn describe(&self) -> ToolDescription;
    /// The normalized parameters, or every problem found.
    fn validate(&self, parameters: Map<String, Value>) -> Result<Map<String, Value>, Vec<FieldProblem>>;
    /// Checks that need stored state rather than the parameters alone, such as a session-context
    /// key the parameters refer to. Runs after `validate` accepted the parameters.
    fn check_references(&self, _parameters: &Map<String, Value>, _session: Option<SessionOf<'_>>) -> Vec<FieldProblem> {
        Vec::new()
    }
    /// The sentence the agent speaks to have the caller confirm.
    fn summarize(&self, parameters: &Map<String, Value>) -> String;
    /// Whether a call with these accepted parameters stops at a checkpoint: the description's
    /// `needs_checkpoint` unless the tool decides per call. It is recorded with the call; a call
    /// that needs one is never run on a `prepare` that answers none (docs/architecture.md,
    /// "The tool contract").
    fn needs_checkpoint(&self, description: &ToolDescription, _parameters: &Map<String, Value>) -> bool {
        description.needs_checkpoint
    }
    /// Everything up to the irreversible step. `None` for a tool that needs no checkpoint.
    async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolFailure>;
    /// The irreversible step, once. With `side_effect_may_have_started`, find out first.
    async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolFailure>;
    /// Undo what `prepare` left behind.
    async fn discard(&self, request: &ToolRequest) -> Result<(), ToolFailure>;
}

/// Declares a tool component's Spin entry point: the contract for `$tool` (see
/// [`contract_routes`]), and optionally a public route of its own (a gated direct flow, `POST`
/// behind the bearer token) served by `$handler`, which is told the component it runs in.
#[macro_export]
macro_rules! tool_component {
    ($tool:expr) => {
        #[::spin_sdk::http_component]
        async fn entry(
            req: $crate::__private::gatehouse_http::IncomingRequest,
            out: $crate::__private::gatehouse_http::ResponseOutparam,
        ) {
            $crate::serve_tool($crate::__private::gatehouse_http::this_component!(), req, out, &$tool).await
        }
    };
    ($tool:expr, $route:literal => $handler:path) => {
        #[::spin_sdk::http_component]
        async fn entry(
            req: $crate::__private::gatehouse_http::IncomingRequest,
            out: $crate::__private::gatehouse_http::ResponseOutparam,
        ) {
            let component = $crate::__private::gatehouse_http::this_component!();
            let tool = $tool;
            $crate::__private::gatehouse_http::serve(component, req, out, |req| {
                $crate::contract_routes(component, &tool, &req)
                    .post(
                        $route,
                        $crate::__private::gatehouse_http::Access::Key(
                            $crate::__private::gatehouse_http::Scope::CallsWrite,
                        ),
                        move |req, params| $handler(component, req, params),
                    )
                    .dispatch(req)
            })
            .await
        }
    };
}

/// Serves the contract of `tool` (see [`contract_routes`]), and nothing else.
pub async fn serve_tool<T: Tool>(component: Component, req: IncomingRequest, out: ResponseOutparam, tool: &T) {
    gatehouse_http::serve(component, req, out, |req| contract_routes(component, tool, &req).dispatch(req)).await
}

/// The contract's routes: `/tool/<operation>` under the chained route `/...` (a component of
/// this host) and under `/internal/tools/<component>/...` (the manifest's route for a tool
/// host, docs/deploying.md, "A tool on its own host"). Either way the caller must be this application (chained, or signed
/// with `contract_secret`); then the operation is answered and recorded in `tool_executions`.
///
/// Every method reaches the handler: `describe` answers any of them, the other operations
/// only POST, and an unknown operation is a 404 whatever the method.
pub fn contract_routes<'a, T: Tool>(component: Component, tool: &'a T, req: &Request) -> Router<'a> {
    let contract = move |req, params| handle(req, params, component, tool);
    // The manifest names a tool host's route after the component's id, which a component
    // serving a declared tool (one crate, many ids) cannot know: the route Spin matched is
    // taken when it has that shape.
    let exposed = gatehouse_http::header(req, "spin-matched-route")
        .filter(|route| contract::tool_of_host_route(route).is_some())
        .map_or_else(|| contract::tool_host_route(component.name), str::to_owned);
    Router::new().any(gatehouse_http::CHAINED_ROUTE, Access::Service, contract).any(exposed, Access::Service, contract)
}

/// The tool as this component describes it, with the component's own version.
pub fn describe_as<T: Tool>(tool: &T, component: Component) -> ToolDescription {
    ToolDescription { version: component.version.to_owned(), ..tool.describe() }
}

/// Who writes a row for work this component does itself.
pub fn identity<T: Tool>(tool: &T, component: Component) -> ToolIdentity {
    identity_of(&tool.describe(), component)
}

fn identity_of(description: &ToolDescription, component: Component) -> ToolIdentity {
    ToolIdentity {
        tool: description.name.clone(),
        component: component.name.to_owned(),
        version: Some(component.version.to_owned()),
    }
}

async fn handle<T: Tool>(req: Request, params: Params, component: Component, tool: &T) -> Result<Reply, ApiError> {
    let op = Operation::ALL
        .into_iter()
        .find(|op| op.path() == params.rest())
        .ok_or_else(|| ApiError::not_found("This tool has no such operation."))?;
    if op == Operation::Describe {
        // Signed, it is single-use like every signed request ("Signed hops").
        crate::guard::spend_service_signature(&req)?;
        return Ok(gatehouse_http::json_response(200, &describe_as(tool, component)).into());
    }
    gatehouse_http::require_method(&req, gatehouse_http::Method::Post)?;
    crate::guard::spend_service_signature(&req)?;
    let request: ToolRequest = gatehouse_http::read_json(&req)?;
    // An operation that acts on a call acts on the call as recorded, once per attempt.
    let request = match op {
        Operation::Prepare | Operation::Execute | Operation::Discard => match crate::guard::guard(op, &request)? {
            Guarded::Act(request) => request,
            Guarded::Recorded(answer) => return Ok(recorded(gatehouse_http::json_response(200, &answer)).into()),
            Guarded::RecordedFailure(refusal) => {
                return Ok(recorded(gatehouse_http::json_response(422, &refusal)).into());
            }
        },
        Operation::Describe | Operation::Validate | Operation::Summarize => request,
    };

    // Described once per request: a description carries the whole parameters schema.
    let description = tool.describe();
    let identity = ToolIdentity { component: component_id(&req, component), ..identity_of(&description, component) };
    let execution = Execution::begin(identity, op, request.tool_call_id.as_ref(), request.trace_id.as_deref())
        .for_tenant(request.tenant.as_deref());
    let (response, finished) = match run(tool, &description, op, &request, &execution).await {
        // An accepted validate handed its row to the caller, in its answer.
        Ok(body) if op == Operation::Validate => {
            return Ok(recorded(gatehouse_http::json_response(200, &body)).into());
        }
        Ok(body) => (gatehouse_http::json_response(200, &body), execution.end(Outcome::Ok, None)),
        Err(Unsuccessful::Refused(refusal)) => {
            let outcome = if op == Operation::Validate { Outcome::Rejected } else { Outcome::Failed };
            let finished = execution.end(outcome, Some(&refusal.error));
            (gatehouse_http::json_response(422, &refusal), finished)
        }
        // Not an answer yet: the contract's "crash", so the lifecycle asks again after a
        // back-off, and the history shows the try as one that did not settle.
        Err(Unsuccessful::AskAgainLater(failure)) => {
            let finished = execution.end(Outcome::Crashed, Some(&failure.message));
            let mut response = gatehouse_http::json_response(503, &failure.refusal());
            response.set_header("retry-after", ASK_AGAIN_AFTER_SECONDS.to_string());
            (response, finished)
        }
    };
    Ok(Reply::from(recorded(response)).then(async move { finished.write() }))
}

/// Tells the caller that this operation's history is taken care of: written here after the
/// answer, handed over in a `validate`'s answer, or nothing to write for an answer repeated
/// from the record.
fn recorded(mut response: gatehouse_http::Response) -> gatehouse_http::Response {
    response.set_header(gatehouse_domain::contract::RECORDED_HEADER, "1");
    response
}

/// Why an operation did not succeed: the tool's answer that ends it, or one to ask again.
enum Unsuccessful {
    Refused(ToolRefusal),
    AskAgainLater(ToolFailure),
}

impl From<ToolRefusal> for Unsuccessful {
    fn from(refusal: ToolRefusal) -> Unsuccessful {
        Unsuccessful::Refused(refusal)
    }
}

async fn run<T: Tool>(
    tool: &T,
    description: &ToolDescription,
    op: Operation,
    request: &ToolRequest,
    execution: &Execution,
) -> Result<Value, Unsuccessful> {
    let failed = |f: ToolFailure| match f.kind {
        FailureKind::AskAgainLater => Unsuccessful::AskAgainLater(f),
        FailureKind::NotDone | FailureKind::MayHaveActed => Unsuccessful::Refused(f.refusal()),
    };
    let to_value =
        |v: Result<Value, serde_json::Error>| v.map_err(|e| Unsuccessful::Refused(ToolRefusal::saying(e.to_string())));
    match op {
        Operation::Describe => to_value(serde_json::to_value(description)),
        Operation::Validate => {
            let validated = accept(tool, description, request.parameters.clone(), request.session(), execution)?;
            to_value(serde_json::to_value(validated))
        }
        Operation::Summarize => {
            to_value(serde_json::to_value(Summary { summary: tool.summarize(&request.parameters) }))
        }
        Operation::Prepare => {
            let checkpoint = tool.prepare(request).await.map_err(failed)?;
            to_value(serde_json::to_value(Prepared { checkpoint }))
        }
        Operation::Execute => to_value(serde_json::to_value(tool.execute(request).await.map_err(failed)?)),
        Operation::Discard => {
            tool.discard(request).await.map_err(failed)?;
            to_value(serde_json::to_value(Discarded::DONE))
        }
    }
}

/// A `validate`, as the contract answers it and as a direct flow runs it in-process: the
/// tool's own checks, then the references the parameters make to stored state. Accepted, it is
/// the normalized parameters with the sentence to speak, whether a checkpoint follows, and the
/// history row `execution` hands to the caller; refused, every problem found.
pub fn accept<T: Tool>(
    tool: &T,
    description: &ToolDescription,
    parameters: Map<String, Value>,
    session: Option<SessionOf<'_>>,
    execution: &Execution,
) -> Result<Validated, ToolRefusal> {
    let checked = tool.validate(parameters).and_then(|parameters| {
        let problems = tool.check_references(&parameters, session);
        if problems.is_empty() { Ok(parameters) } else { Err(problems) }
    });
    match checked {
        Ok(parameters) => Ok(Validated {
            summary: tool.summarize(&parameters),
            needs_checkpoint: tool.needs_checkpoint(description, &parameters),
            execution: Some(execution.handed_over()),
            parameters,
        }),
        Err(fields) => Err(ToolRefusal { fields, ..ToolRefusal::saying("Some of the details aren't valid.") }),
    }
}

/// The component id as the application knows it: the contract is reached only through
/// service chaining, so the request's host is `<component id>.spin.internal`.
fn component_id(req: &Request, component: Component) -> String {
    gatehouse_http::header(req, "spin-full-url").and_then(host_component).unwrap_or_else(|| component.name.to_owned())
}

fn host_component(url: &str) -> Option<String> {
    let host = url.split("://").nth(1)?.split(['/', ':']).next()?;
    host.strip_suffix(".spin.internal").map(str::to_owned)
}
