use std::time::Duration;

use gatehouse_domain::contract::{
    CALL_ID_HEADER, Checkpoint, ContractAnswer, ContractBreach, Discarded, Executed, FaultKind, Operation, Prepared,
    RECORDED_HEADER, Summary, TOOL_HEADER, ToolDescription, ToolFault, ToolRefusal, ToolRequest, Validated,
    read_answer,
};
use gatehouse_domain::signing;
use gatehouse_platform::{Method, SendFailure};

use crate::history::{Execution, Outcome, ToolIdentity};
use crate::registry::ToolTarget;

/// How a contract call went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// A definitive answer from the tool (422): invalid parameters, or a failure it reports.
    #[error("{}", .0.error)]
    Refused(ToolRefusal),
    /// The tool trapped, timed out or could not be reached; the operation may be retried. The
    /// fault says which, for the answer and the tools list.
    #[error("{0}")]
    Crashed(ToolFault),
    /// The tool answered outside the contract ([`ContractBreach`]): final, never retried, and
    /// never read as success (docs/architecture.md, "The tool contract"). The fault's kind is
    /// [`FaultKind::BrokeContract`].
    #[error("{0}")]
    BrokeContract(ToolFault),
}

impl ToolError {
    /// The breach as the lifecycle reports it, with where the tool is served.
    pub fn broke_contract(component: &str, breach: &ContractBreach) -> ToolError {
        let origin = crate::registry::ToolTarget::of(component).origin();
        ToolError::BrokeContract(ToolFault::new(FaultKind::BrokeContract, format!("{origin}: {breach}")))
    }
}

/// A tool's refusal with its sentence and field problems cut to their bounds: the tool wrote
/// them, the call keeps them, and every reader of the call gets them again.
fn bounded(refusal: ToolRefusal) -> ToolRefusal {
    use gatehouse_domain::limits::{MAX_LABEL_CHARS, MAX_TOOL_SENTENCE_CHARS, truncate_chars};
    /// More field problems than any tool's parameters have fields.
    const MAX_FIELDS: usize = 100;
    let fields = refusal
        .fields
        .into_iter()
        .take(MAX_FIELDS)
        .map(|f| gatehouse_domain::FieldProblem {
            field: truncate_chars(&f.field, MAX_LABEL_CHARS),
            problem: truncate_chars(&f.problem, MAX_TOOL_SENTENCE_CHARS),
        })
        .collect();
    ToolRefusal { error: truncate_chars(&refusal.error, MAX_TOOL_SENTENCE_CHARS), fields, ..refusal }
}

/// The tool contract, spoken to one tool: a component of this application through service
/// chaining, or a tool host at a URL (signed with `contract_secret`).
#[derive(Debug, Clone)]
pub struct ToolClient {
    /// The tool's function name, for the history rows written on its behalf.
    tool: String,
    component: String,
    timeout: Duration,
}

impl ToolClient {
    /// A client for the tool `tool` served at `component` (a component id or a tool host's URL,
    /// as the registry names it), giving each request at most `timeout`.
    pub fn new(tool: impl Into<String>, component: impl Into<String>, timeout: Duration) -> ToolClient {
        ToolClient { tool: tool.into(), component: component.into(), timeout }
    }

    /// Who the history rows written on the tool's behalf name. The version is the one the
    /// component last reported itself.
    pub fn identity(&self) -> ToolIdentity {
        ToolIdentity { tool: self.tool.clone(), component: self.component.clone(), version: None }
    }

    /// Where the tool is served, as the registry names it.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The tool's `describe`: what it is, for the agent.
    pub async fn describe(&self) -> Result<ToolDescription, ToolError> {
        self.exchange(Operation::Describe, None).await.map(|(description, _)| description).map_err(|(error, _)| error)
    }

    /// The tool's `validate`. A tool that neither wrote its history row nor handed it over
    /// (a tool on another host that is not a Gatehouse component) gets it made here, for the
    /// caller to write with its own work, as a handed-over row is.
    pub async fn validate(&self, request: &ToolRequest) -> Result<Validated, ToolError> {
        let (mut validated, unrecorded) = self.call::<Validated>(Operation::Validate, request).await?;
        if let Some(execution) = unrecorded
            && validated.execution.is_none()
        {
            validated.execution = Some(execution.handed_over());
        }
        Ok(validated)
    }

    /// The tool's `summarize`: the sentence for these parameters.
    pub async fn summarize(&self, request: &ToolRequest) -> Result<String, ToolError> {
        self.recorded::<Summary>(Operation::Summarize, request).await.map(|s| s.summary)
    }

    /// The tool's `prepare`: its checkpoint, if it has one.
    pub async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError> {
        self.recorded::<Prepared>(Operation::Prepare, request).await.map(|p| p.checkpoint)
    }

    /// The tool's `execute`: the irreversible step.
    pub async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolError> {
        self.recorded(Operation::Execute, request).await
    }

    /// The tool's `discard`: undo what `prepare` left.
    pub async fn discard(&self, request: &ToolRequest) -> Result<(), ToolError> {
        self.recorded::<Discarded>(Operation::Discard, request).await.map(drop)
    }

    /// An operation whose history row is written by the time it returns, whoever wrote it.
    async fn recorded<T: ContractAnswer>(&self, op: Operation, request: &ToolRequest) -> Result<T, ToolError> {
        let (answer, unrecorded) = self.call(op, request).await?;
        if let Some(execution) = unrecorded {
            execution.end(Outcome::Ok, None).write();
        }
        Ok(answer)
    }

    /// One operation on a call, and its history row (docs/architecture.md, "Observability"):
    /// a Gatehouse tool writes its own and says so with [`RECORDED_HEADER`]; for any other
    /// tool, and for every crash (the tool could not write it), the row is written here. A
    /// success the tool did not record comes back unwritten, for the caller to finish.
    async fn call<T: ContractAnswer>(
        &self,
        op: Operation,
        request: &ToolRequest,
    ) -> Result<(T, Option<Execution>), ToolError> {
        let execution =
            Execution::begin(self.identity(), op, request.tool_call_id.as_ref(), request.trace_id.as_deref())
                .for_tenant(request.tenant.as_deref());
        match self.exchange(op, Some(request)).await {
            Ok((answer, true)) => Ok((answer, None)),
            Ok((answer, false)) => Ok((answer, Some(execution))),
            Err((error, recorded)) => {
                let outcome = match &error {
                    ToolError::Crashed(_) => Some(Outcome::Crashed),
                    ToolError::Refused(_) | ToolError::BrokeContract(_) if recorded => None,
                    ToolError::BrokeContract(_) => Some(Outcome::Failed),
                    ToolError::Refused(_) if op == Operation::Validate => Some(Outcome::Rejected),
                    ToolError::Refused(_) => Some(Outcome::Failed),
                };
                if let Some(outcome) = outcome {
                    execution.end(outcome, Some(&error.to_string())).write();
                }
                Err(error)
            }
        }
    }

    /// The request and its answer; with it, whether the tool recorded the operation itself.
    async fn exchange<T: ContractAnswer>(
        &self,
        op: Operation,
        request: Option<&ToolRequest>,
    ) -> Result<(T, bool), (ToolError, bool)> {
        let crashed =
            |kind: FaultKind, explanation: String| (ToolError::Crashed(ToolFault::new(kind, explanation)), false);
        let target = ToolTarget::of(&self.component);
        let url = target.url(&op.path());
        let (method, body) = match request {
            Some(request) => (
                Method::Post,
                serde_json::to_vec(request)
                    .map_err(|e| crashed(FaultKind::Misconfigured, format!("the request could not be encoded: {e}")))?,
            ),
            None => (Method::Get, Vec::new()),
        };
        let call_id = request.and_then(|r| r.tool_call_id.as_ref()).map(ToString::to_string);
        let mut headers = vec![("content-type", "application/json"), (TOOL_HEADER, self.tool.as_str())];
        if let Some(call_id) = &call_id {
            headers.push((CALL_ID_HEADER, call_id));
        }
        let traceparent = request.and_then(|r| r.trace_id.as_deref()).map(gatehouse_platform::traceparent);
        if let Some(traceparent) = &traceparent {
            headers.push(("traceparent", traceparent));
        }
        let signature = gatehouse_platform::service_signature(&method, &url, &body).map_err(|e| {
            crashed(FaultKind::Misconfigured, format!("the request could not be signed: {}", e.message))
        })?;
        if let Some((name, value)) = &signature {
            headers.push((name, value));
        }
        let answer = gatehouse_platform::send(method, &url, &headers, body, self.timeout).await.map_err(|failure| {
            let (kind, explanation) = unanswered(target, &failure);
            crashed(kind, explanation)
        })?;
        let recorded = answer.header(RECORDED_HEADER).is_some();
        let broke = |breach: ContractBreach| (ToolError::broke_contract(&self.component, &breach), recorded);
        match answer.status {
            200..=299 => read_answer(op, &answer.body).map(|answer| (answer, recorded)).map_err(broke),
            422 => {
                let refusal: ToolRefusal = read_answer(op, &answer.body).map_err(broke)?;
                Err((ToolError::Refused(bounded(refusal)), recorded))
            }
            status @ (401 | 403) => Err(crashed(
                FaultKind::SignatureRefused,
                format!("{} refused the request's contract signature (HTTP {status}): {}", target.origin(), {
                    match refused_part(&answer.body) {
                        Some(refusal) => format!("{}: {refusal}", refusal.code().as_str()),
                        None => "the two sides' contract_secret differ, or one has none".to_owned(),
                    }
                }),
            )),
            status => Err(crashed(
                FaultKind::ErrorStatus,
                format!("{} answered {} with HTTP {status}", target.origin(), op.as_str()),
            )),
        }
    }
}

/// Which part of the signature a tool's 401 says failed (`signature_stale`, …), when its body
/// names one of the recipe's codes; an operator then knows a clock from a secret.
fn refused_part(body: &[u8]) -> Option<signing::Refusal> {
    #[derive(serde::Deserialize)]
    struct Refused {
        code: String,
    }
    serde_json::from_slice::<Refused>(body).ok().and_then(|refused| signing::Refusal::of_code(&refused.code))
}

/// Why a request got no answer, in a sentence an operator acts on.
fn unanswered(target: ToolTarget<'_>, failure: &SendFailure) -> (FaultKind, String) {
    let origin = target.origin();
    match failure {
        SendFailure::Denied => (
            FaultKind::NotAllowed,
            format!("the manifest's allowed_outbound_hosts for this component does not name {origin}"),
        ),
        SendFailure::NotConnected(why) => (FaultKind::NoConnection, format!("no connection to {origin} ({why})")),
        SendFailure::TimedOut(after) => {
            (FaultKind::TimedOut, format!("no answer from {origin} within {} ms", after.as_millis()))
        }
        SendFailure::TooLarge(cap) => (FaultKind::BadAnswer, format!("{origin} answered with more than {cap} bytes")),
        SendFailure::Transport(why) => (FaultKind::BadAnswer, format!("the exchange with {origin} broke off: {why}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool's 401 that names the part of the signature it refused is read as that part; any
    /// other body (an older tool's `unauthorized`, no JSON) names none.
    #[test]
    fn a_refusal_names_the_part_of_the_signature_that_failed() {
        let said = |body: &str| refused_part(body.as_bytes());
        assert_eq!(said(r#"{"error":"…","code":"signature_stale"}"#), Some(signing::Refusal::Stale));
        assert_eq!(said(r#"{"error":"…","code":"signature_replayed"}"#), Some(signing::Refusal::Replayed));
        assert_eq!(said(r#"{"error":"…","code":"unauthorized"}"#), None);
        assert_eq!(said("not json"), None);
    }
}
