use std::time::Duration;

use gatehouse_domain::contract::{
    Checkpoint, Executed, Operation, Prepared, Summary, ToolDescription, ToolRefusal, ToolRequest, Validated,
};
use gatehouse_platform::Method;
use serde::de::DeserializeOwned;

use crate::history::{Execution, Outcome, ToolIdentity};
use crate::registry::ToolTarget;

/// How a contract call went wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// A definitive answer from the tool (422): invalid parameters, or a failure it reports.
    #[error("{}", .0.error)]
    Refused(ToolRefusal),
    /// The tool trapped, timed out, could not be reached or answered nonsense; the operation
    /// may be retried.
    #[error("{0}")]
    Crashed(String),
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
    ToolRefusal { error: truncate_chars(&refusal.error, MAX_TOOL_SENTENCE_CHARS), fields }
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
    pub fn new(tool: impl Into<String>, component: impl Into<String>, timeout: Duration) -> ToolClient {
        ToolClient { tool: tool.into(), component: component.into(), timeout }
    }

    /// Who the history rows written on the tool's behalf name. The version is the one the
    /// component last reported itself.
    pub fn identity(&self) -> ToolIdentity {
        ToolIdentity { tool: self.tool.clone(), component: self.component.clone(), version: None }
    }

    pub fn component(&self) -> &str {
        &self.component
    }

    pub async fn describe(&self) -> Result<ToolDescription, ToolError> {
        self.call(Operation::Describe, None).await
    }

    pub async fn validate(&self, request: &ToolRequest) -> Result<Validated, ToolError> {
        self.call(Operation::Validate, Some(request)).await
    }

    pub async fn summarize(&self, request: &ToolRequest) -> Result<String, ToolError> {
        self.call::<Summary>(Operation::Summarize, Some(request)).await.map(|s| s.summary)
    }

    pub async fn prepare(&self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError> {
        self.call::<Prepared>(Operation::Prepare, Some(request)).await.map(|p| p.checkpoint)
    }

    pub async fn execute(&self, request: &ToolRequest) -> Result<Executed, ToolError> {
        self.call(Operation::Execute, Some(request)).await
    }

    pub async fn discard(&self, request: &ToolRequest) -> Result<(), ToolError> {
        self.call::<serde_json::Value>(Operation::Discard, Some(request)).await.map(drop)
    }

    async fn call<T: DeserializeOwned>(&self, op: Operation, request: Option<&ToolRequest>) -> Result<T, ToolError> {
        let execution =
            request.map(|r| Execution::begin(self.identity(), op, r.tool_call_id.as_ref(), r.trace_id.as_deref()));
        let outcome = self.exchange(op, request).await;
        // A tool that answered wrote its own row; one that crashed could not, so it is
        // written here, or the history would hide exactly the executions that went wrong.
        if let (Err(ToolError::Crashed(detail)), Some(execution)) = (&outcome, execution) {
            execution.end(Outcome::Crashed, Some(detail)).write();
        }
        outcome
    }

    async fn exchange<T: DeserializeOwned>(
        &self,
        op: Operation,
        request: Option<&ToolRequest>,
    ) -> Result<T, ToolError> {
        let url = ToolTarget::of(&self.component).url(&op.path());
        let (method, body) = match request {
            Some(request) => (
                Method::Post,
                serde_json::to_vec(request).map_err(|e| ToolError::Crashed(format!("encoding the request: {e}")))?,
            ),
            None => (Method::Get, Vec::new()),
        };
        let mut headers = vec![("content-type", "application/json")];
        let traceparent = request.and_then(|r| r.trace_id.as_deref()).map(gatehouse_platform::traceparent);
        if let Some(traceparent) = &traceparent {
            headers.push(("traceparent", traceparent));
        }
        let signature = gatehouse_platform::service_signature(&method, &url, &body)
            .map_err(|e| ToolError::Crashed(format!("signing the request: {}", e.message)))?;
        if let Some((name, value)) = &signature {
            headers.push((name, value));
        }
        let answer = gatehouse_platform::send(method, &url, &headers, body, self.timeout)
            .await
            .map_err(|e| ToolError::Crashed(format!("{} {}: {e}", self.component, op.as_str())))?;
        let crashed = |what: String| ToolError::Crashed(format!("{} {}: {what}", self.component, op.as_str()));
        match answer.status {
            200..=299 => serde_json::from_slice(&answer.body).map_err(|e| crashed(format!("unreadable answer: {e}"))),
            422 => {
                let refusal: ToolRefusal =
                    serde_json::from_slice(&answer.body).map_err(|e| crashed(format!("unreadable refusal: {e}")))?;
                Err(ToolError::Refused(bounded(refusal)))
            }
            status => Err(crashed(format!("answered HTTP {status}"))),
        }
    }
}
