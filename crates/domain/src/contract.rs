//! The tool contract (docs/architecture.md, "The tool contract"), as it travels over service
//! chaining.
//!
//! A tool component answers `GET /tool/describe` and `POST /tool/<operation>` on its private
//! route. Lifecycle components only ever speak these types, so they hold no tool-specific code.
//!
//! Status codes carry the outcome: 200 is success; 422 is a definitive "no" from the tool
//! (field errors on `validate`, a failure on `prepare`/`execute`), with the flat error shape;
//! anything else, a trap included, means the tool crashed and the operation may be retried.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{FieldProblem, SessionId, SessionOf, ToolCallId};

/// The path prefix of the contract on a tool component.
pub const CONTRACT_PATH: &str = "/tool";

/// The path under which a tool host's components serve their contracts, one segment each.
const TOOL_HOSTS: &str = "/internal/tools/";

/// Where a tool component's contract is reached from another host: the manifest routes
/// `/internal/tools/<component id>/...` to it (docs/tools.md, "A tool on its own host").
pub fn tool_host_route(component: &str) -> String {
    format!("{TOOL_HOSTS}{component}/...")
}

/// The component id a manifest route serves a tool's contract for, when the route has the
/// shape [`tool_host_route`] writes: one non-empty segment.
pub fn tool_of_host_route(route: &str) -> Option<&str> {
    route
        .strip_prefix(TOOL_HOSTS)
        .and_then(|rest| rest.strip_suffix("/..."))
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// The URL of `component`'s contract on the application at `base` (`http://host:port`).
pub fn tool_host_url(base: &str, component: &str) -> String {
    format!("{}{TOOL_HOSTS}{component}", base.trim_end_matches('/'))
}

/// The response header by which a tool says it wrote the operation's `tool_executions` row
/// itself (the contract server of a Gatehouse tool component does). The caller writes the row
/// for a tool that does not say so (docs/architecture.md, "Observability").
pub const RECORDED_HEADER: &str = "gatehouse-execution-recorded";

/// The request header naming the call an operation is for, and the response header naming the
/// call a create made. A label for traces (docs/architecture.md, "Traces"), read by nothing
/// that decides anything: the call's id that counts is in the body.
pub const CALL_ID_HEADER: &str = "gatehouse-call-id";

/// The request header naming the tool an operation is for (its function name), a label for
/// traces like [`CALL_ID_HEADER`].
pub const TOOL_HEADER: &str = "gatehouse-tool";

/// One operation of the contract; also the last segment of its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Describe,
    Validate,
    Summarize,
    Prepare,
    Execute,
    /// Undo what `prepare` left behind, after a cancel or an expiry at the checkpoint.
    Discard,
}

impl Operation {
    pub const ALL: [Operation; 6] = [
        Operation::Describe,
        Operation::Validate,
        Operation::Summarize,
        Operation::Prepare,
        Operation::Execute,
        Operation::Discard,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            Operation::Describe => "describe",
            Operation::Validate => "validate",
            Operation::Summarize => "summarize",
            Operation::Prepare => "prepare",
            Operation::Execute => "execute",
            Operation::Discard => "discard",
        }
    }

    pub fn parse(segment: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.as_str() == segment)
    }

    /// `/tool/<operation>`
    pub fn path(self) -> String {
        format!("{CONTRACT_PATH}/{}", self.as_str())
    }
}

/// What `describe` answers: the registry entry of one tool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolDescription {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub description: String,
    /// JSON Schema (2020-12) of the parameters object.
    pub parameters_schema: Value,
    /// Whether the call stops at PREPARED for a "proceed" before its irreversible step.
    pub needs_checkpoint: bool,
    /// The component's own crate version, filled in by the contract server.
    #[serde(default)]
    pub version: String,
    /// What running the tool does to the world, if the tool says (MCP's tool annotations
    /// come from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<ToolEffects>,
}

/// What a tool's execution does, as a client deciding how careful to be needs to know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEffects {
    /// It changes nothing.
    pub read_only: bool,
    /// It may destroy or overwrite something (rather than only add).
    pub destructive: bool,
    /// Running it again with the same parameters changes nothing more.
    pub idempotent: bool,
    /// It reaches a world beyond this application (another service, other people).
    pub open_world: bool,
}

/// The body of every `POST /tool/<operation>`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// Absent only for `validate`/`summarize` before the call exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<ToolCallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The tenant the call belongs to, whose session `session_id` is; absent from a caller
    /// that predates tenants, and then the first tenant ([`ToolRequest::session`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub parameters: Map<String, Value>,
    /// What `prepare` returned, for `execute` and `discard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<Checkpoint>,
    /// 1 on the first try; higher when the call is being re-driven after a crash.
    #[serde(default = "first_attempt")]
    pub attempt: u32,
    /// Set when an earlier `execute` of this call may have performed the side effect: the tool
    /// must find out whether it did before doing anything: a side effect is never run blind
    /// twice (docs/architecture.md, "Exactly once").
    #[serde(default)]
    pub side_effect_may_have_started: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl ToolRequest {
    /// The call's session, as its tenant names it.
    pub fn session(&self) -> Option<SessionOf<'_>> {
        let tenant = self.tenant();
        self.session_id.as_ref().map(|session_id| SessionOf { tenant, session_id })
    }

    /// The call's tenant: the first tenant's for a caller that predates tenants.
    pub fn tenant(&self) -> &str {
        self.tenant.as_deref().unwrap_or(crate::keys::DEFAULT_TENANT)
    }
}

fn first_attempt() -> u32 {
    1
}

/// `validate` answers the normalized parameters together with the summary of exactly those
/// parameters, because every caller of `validate` speaks the summary next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validated {
    pub parameters: Map<String, Value>,
    pub summary: String,
    /// The tool's [`ToolDescription::needs_checkpoint`], recorded with the call so the executor
    /// knows, without asking the tool again, whether `prepare` has anything to do. A tool host
    /// that does not say is taken to need one: its calls keep the full walk.
    #[serde(default = "needs_checkpoint_unless_told")]
    pub needs_checkpoint: bool,
    /// The tool's history row for this `validate`, handed to the caller instead of written by
    /// the tool (see [`ValidateExecution`]). A tool host that does not send it wrote the row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ValidateExecution>,
}

/// Who ran an accepted `validate` and how long it took: its row of the tool's execution
/// history (operation `validate`, outcome `ok`). The tool hands it to the caller, which writes
/// it in the statement that records its own work: a create writes it with the call it
/// inserts, in one statement and one commit, where the tool writing it would be a second
/// statement, commit and connection, about a sixth of a create's CPU (docs/benchmarks.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidateExecution {
    /// The tool's function name.
    pub tool: String,
    pub component: String,
    pub component_version: Option<String>,
    /// Unix seconds, with fractions.
    pub started_at: f64,
    pub duration_ms: f64,
}

fn needs_checkpoint_unless_told() -> bool {
    true
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub summary: String,
}

/// What `prepare` leaves for `execute`: the sentence spoken at the checkpoint and the
/// tool's own state (a draft id, for example).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub message: String,
    #[serde(default)]
    pub state: Value,
}

/// `prepare` answers `checkpoint: null` for a tool that needs no checkpoint: the executor then
/// goes straight on to `execute`. The key is required: an answer without it is not read as
/// "no checkpoint" (docs/architecture.md, "The tool contract": a tool cannot skip its own
/// checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prepared {
    // Without `deserialize_with`, serde reads a missing `Option` as `None`.
    #[serde(deserialize_with = "Option::deserialize")]
    pub checkpoint: Option<Checkpoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Executed {
    // Required even when `null`: a missing key is an answer outside the contract.
    #[serde(deserialize_with = "Value::deserialize")]
    pub result: Value,
    pub voice_response: String,
}

/// What `discard` answers: `{"discarded": true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discarded {
    pub discarded: bool,
}

impl Discarded {
    pub const DONE: Discarded = Discarded { discarded: true };
}

/// A tool's answer that breaks openapi/tool-contract.yaml: a missing or mistyped field, an
/// empty sentence, or a checkpoint left out by a tool that declared one. It is final, never
/// retried: the tool answered, and what it answered cannot be trusted to move a call
/// (docs/architecture.md, "The tool contract").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation}'s answer breaks the tool contract: {problem}", operation = .operation.as_str())]
pub struct ContractBreach {
    pub operation: Operation,
    /// What is wrong, naming the field.
    pub problem: String,
}

impl ContractBreach {
    pub fn new(operation: Operation, problem: impl Into<String>) -> ContractBreach {
        ContractBreach { operation, problem: problem.into() }
    }
}

/// An answer of the contract, read strictly: its shape by serde, and the rules of the
/// contract's schema serde cannot say (a sentence that must not be empty) by [`check`].
///
/// [`check`]: ContractAnswer::check
pub trait ContractAnswer: DeserializeOwned {
    /// The first rule of the schema the answer breaks, naming the field.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// Reads `body`, the answer to `operation`, as its contract type `T`, strictly. Every reader
/// of a tool's answers (the lifecycle's client, the conformance kit) reads them here, so a tool
/// is held to one reading of openapi/tool-contract.yaml.
pub fn read_answer<T: ContractAnswer>(operation: Operation, body: &[u8]) -> Result<T, ContractBreach> {
    let answer: T = serde_json::from_slice(body).map_err(|e| ContractBreach::new(operation, shape_problem(&e)))?;
    answer.check().map_err(|problem| ContractBreach::new(operation, problem))?;
    Ok(answer)
}

/// serde's sentence without its position, which says nothing to the tool's author.
fn shape_problem(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.find(" at line ") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

/// The checkpoint `prepare` answered, held to what the tool declared: a tool that
/// `needs_checkpoint` and answers `checkpoint: null` would let its call run without the
/// caller's second yes, so that answer is a breach, not "no checkpoint".
pub fn declared_checkpoint(
    needs_checkpoint: bool,
    checkpoint: Option<Checkpoint>,
) -> Result<Option<Checkpoint>, ContractBreach> {
    match checkpoint {
        None if needs_checkpoint => Err(ContractBreach::new(
            Operation::Prepare,
            "`checkpoint` is null, but the tool declared `needs_checkpoint: true`: its call would run without \
             the caller's answer at the checkpoint",
        )),
        checkpoint => Ok(checkpoint),
    }
}

fn spoken(field: &str, text: &str) -> Result<(), String> {
    if text.trim().is_empty() { Err(format!("`{field}` is empty; it is a sentence the caller hears")) } else { Ok(()) }
}

impl ContractAnswer for ToolDescription {
    fn check(&self) -> Result<(), String> {
        if self.name.trim().is_empty() {
            return Err("`name` is empty".to_owned());
        }
        if !self.parameters_schema.is_object() {
            return Err("`parameters_schema` is not an object".to_owned());
        }
        Ok(())
    }
}

impl ContractAnswer for Validated {
    fn check(&self) -> Result<(), String> {
        spoken("summary", &self.summary)
    }
}

impl ContractAnswer for Summary {
    fn check(&self) -> Result<(), String> {
        spoken("summary", &self.summary)
    }
}

impl ContractAnswer for Prepared {
    fn check(&self) -> Result<(), String> {
        match &self.checkpoint {
            Some(checkpoint) => spoken("checkpoint.message", &checkpoint.message),
            None => Ok(()),
        }
    }
}

impl ContractAnswer for Executed {}

impl ContractAnswer for Discarded {
    fn check(&self) -> Result<(), String> {
        if self.discarded { Ok(()) } else { Err("`discarded` is false; the contract answers `true`".to_owned()) }
    }
}

impl ContractAnswer for ToolRefusal {
    fn check(&self) -> Result<(), String> {
        spoken("error", &self.error)
    }
}

/// The body of a 422 from a tool: a sentence for the caller, and field errors from `validate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRefusal {
    pub error: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldProblem>,
    /// Set by an `execute` that failed but cannot tell whether it acted (its backend did not
    /// answer in time, and cannot be asked again safely): the call fails, and what `prepare`
    /// left is not discarded, since it may have been used (docs/architecture.md, "Exactly once").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_have_acted: bool,
}

impl ToolRefusal {
    /// A refusal saying `error`, with no field problems.
    pub fn saying(error: impl Into<String>) -> ToolRefusal {
        ToolRefusal { error: error.into(), fields: Vec::new(), may_have_acted: false }
    }
}

/// Why a tool could not be used: what `/voice-tools/tools` lists beside an unavailable tool
/// and what a create's 502 `tool_unavailable` carries as its `cause`, so an operator reads it
/// in the answer, not only in a log (docs/architecture.md, "The tool contract").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFault {
    pub kind: FaultKind,
    /// One sentence for an operator. It names no secret and quotes nothing the tool answered.
    pub explanation: String,
}

/// The kinds of [`ToolFault`], each with one remedy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// The manifest's `allowed_outbound_hosts` does not let the component reach the tool.
    NotAllowed,
    /// No connection could be made: refused, no such host, no route.
    NoConnection,
    /// The tool did not answer within its timeout.
    TimedOut,
    /// The tool refused the request's contract signature (401 or 403): the two sides'
    /// `contract_secret` differ, or one side has none.
    SignatureRefused,
    /// The tool answered with a status the contract does not give (a 5xx, a trap, a 404).
    ErrorStatus,
    /// The tool answered with more than an answer may be, or the exchange broke off.
    BadAnswer,
    /// The tool answered 2xx or 422 with a body outside the contract's schema, or left out the
    /// checkpoint it declared ([`ContractBreach`]). Final: the call fails, it is not retried.
    BrokeContract,
    /// This side could not make the request (a variable it needs could not be read).
    Misconfigured,
}

impl FaultKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            FaultKind::NotAllowed => "not_allowed",
            FaultKind::NoConnection => "no_connection",
            FaultKind::TimedOut => "timed_out",
            FaultKind::SignatureRefused => "signature_refused",
            FaultKind::ErrorStatus => "error_status",
            FaultKind::BadAnswer => "bad_answer",
            FaultKind::BrokeContract => "broke_contract",
            FaultKind::Misconfigured => "misconfigured",
        }
    }
}

impl ToolFault {
    pub fn new(kind: FaultKind, explanation: impl Into<String>) -> ToolFault {
        ToolFault { kind, explanation: explanation.into() }
    }
}

impl std::fmt::Display for ToolFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.explanation, self.kind.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_host_route_names_its_component_and_nothing_else_does() {
        assert_eq!(tool_of_host_route(&tool_host_route("gmail")), Some("gmail"));
        assert_eq!(tool_host_url("http://127.0.0.1:3000/", "gmail"), "http://127.0.0.1:3000/internal/tools/gmail");
        assert_eq!(tool_of_host_route("/internal/tools/gmail"), None);
        assert_eq!(tool_of_host_route("/internal/tools//..."), None);
        assert_eq!(tool_of_host_route("/internal/tools/a/b/..."), None);
        assert_eq!(tool_of_host_route("/execute-gmail"), None);
    }

    #[test]
    fn operations_round_trip_through_their_paths() {
        for op in Operation::ALL {
            assert_eq!(Operation::parse(op.as_str()), Some(op));
            assert_eq!(op.path(), format!("/tool/{}", op.as_str()));
        }
        assert_eq!(Operation::parse("send"), None);
    }

    #[test]
    fn requests_default_to_a_first_attempt() {
        let request: ToolRequest = serde_json::from_str(r#"{"parameters": {"to": "a@b.c"}}"#).unwrap_or_else(|e| {
            panic!("{e}");
        });
        assert_eq!(request.attempt, 1);
        assert!(!request.side_effect_may_have_started);
        assert!(request.tool_call_id.is_none());
    }

    #[test]
    fn a_prepare_answer_without_its_checkpoint_key_breaks_the_contract() {
        let missing = read_answer::<Prepared>(Operation::Prepare, br#"{"hold": "H-1"}"#);
        assert!(missing.is_err_and(|breach| breach.problem.contains("`checkpoint`")), "the field is named");
        let none = read_answer::<Prepared>(Operation::Prepare, br#"{"checkpoint": null}"#);
        assert_eq!(none.map(|p| p.checkpoint), Ok(None));
        let empty = read_answer::<Prepared>(Operation::Prepare, br#"{"checkpoint": {"message": " "}}"#);
        assert!(empty.is_err_and(|breach| breach.problem.contains("checkpoint.message")));
    }

    #[test]
    fn a_tool_that_declared_a_checkpoint_cannot_answer_none() {
        let breach = declared_checkpoint(true, None).err();
        assert!(breach.is_some_and(|b| b.operation == Operation::Prepare && b.problem.contains("needs_checkpoint")));
        assert_eq!(declared_checkpoint(false, None), Ok(None));
        let checkpoint = Checkpoint { message: "Ready.".into(), state: Value::Null };
        assert_eq!(declared_checkpoint(true, Some(checkpoint.clone())), Ok(Some(checkpoint)));
    }

    #[test]
    fn every_answer_is_read_against_its_schema() {
        let breaks = |op, body: &str| match op {
            Operation::Validate => read_answer::<Validated>(op, body.as_bytes()).err(),
            Operation::Summarize => read_answer::<Summary>(op, body.as_bytes()).err(),
            Operation::Execute => read_answer::<Executed>(op, body.as_bytes()).err(),
            Operation::Discard => read_answer::<Discarded>(op, body.as_bytes()).err(),
            _ => read_answer::<ToolDescription>(op, body.as_bytes()).err(),
        };
        for (op, body, field) in [
            (Operation::Validate, r#"{"parameters": {}, "summary": ""}"#, "summary"),
            (Operation::Validate, r#"{"summary": "Shall I?"}"#, "parameters"),
            (Operation::Summarize, r#"{"summary": 3}"#, "invalid type"),
            (Operation::Execute, r#"{"voice_response": "Done."}"#, "result"),
            (Operation::Execute, r#"{"result": {}}"#, "voice_response"),
            (Operation::Discard, r#"{}"#, "discarded"),
            (Operation::Discard, r#"{"discarded": false}"#, "discarded"),
            (
                Operation::Describe,
                r#"{"name": "", "description": "", "parameters_schema": {}, "needs_checkpoint": true}"#,
                "name",
            ),
            (Operation::Describe, r#"{"name": "t", "description": "", "parameters_schema": {}}"#, "needs_checkpoint"),
        ] {
            let breach = breaks(op, body);
            assert!(breach.as_ref().is_some_and(|b| b.to_string().contains(field)), "{body}: {breach:?}");
        }
        assert!(read_answer::<Executed>(Operation::Execute, br#"{"result": null, "voice_response": "Done."}"#).is_ok());
        assert!(read_answer::<ToolRefusal>(Operation::Execute, br#"{"error": ""}"#).is_err());
    }

    #[test]
    fn a_validate_answer_without_a_history_row_means_the_tool_wrote_it() {
        let answer: Validated =
            serde_json::from_str(r#"{"parameters": {}, "summary": "s"}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(answer.needs_checkpoint && answer.execution.is_none());
        let execution = ValidateExecution {
            tool: "t".into(),
            component: "c".into(),
            component_version: Some("1.0.0".into()),
            started_at: 1.5,
            duration_ms: 0.25,
        };
        let handed = Validated { execution: Some(execution), ..answer };
        let round_trip: Validated =
            serde_json::from_value(serde_json::to_value(&handed).unwrap_or_else(|e| panic!("{e}")))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(round_trip, handed);
    }
}
