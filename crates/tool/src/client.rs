use std::time::Duration;

use gatehouse_domain::contract::{
    Checkpoint, Executed, Operation, Prepared, Summary, ToolDescription, ToolRefusal, ToolRequest, Validated,
};
use gatehouse_http::Method;
use serde::de::DeserializeOwned;

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

/// The tool contract, spoken to one tool component through service chaining.
#[derive(Debug, Clone)]
pub struct ToolClient {
    component: String,
    timeout: Duration,
}

impl ToolClient {
    pub fn new(component: impl Into<String>, timeout: Duration) -> ToolClient {
        ToolClient { component: component.into(), timeout }
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
        let url = format!("http://{}.spin.internal{}", self.component, op.path());
        let (method, body) = match request {
            Some(request) => (
                Method::Post,
                serde_json::to_vec(request).map_err(|e| ToolError::Crashed(format!("encoding the request: {e}")))?,
            ),
            None => (Method::Get, Vec::new()),
        };
        let mut headers = vec![("content-type", "application/json")];
        let traceparent = request.and_then(|r| r.trace_id.as_deref()).map(gatehouse_http::traceparent);
        if let Some(traceparent) = &traceparent {
            headers.push(("traceparent", traceparent));
        }
        let answer = gatehouse_http::send(method, &url, &headers, body, self.timeout)
            .await
            .map_err(|e| ToolError::Crashed(format!("{} {}: {e}", self.component, op.as_str())))?;
        let crashed = |what: String| ToolError::Crashed(format!("{} {}: {what}", self.component, op.as_str()));
        match answer.status {
            200..=299 => serde_json::from_slice(&answer.body).map_err(|e| crashed(format!("unreadable answer: {e}"))),
            422 => Err(ToolError::Refused(
                serde_json::from_slice(&answer.body).map_err(|e| crashed(format!("unreadable refusal: {e}")))?,
            )),
            status => Err(crashed(format!("answered HTTP {status}"))),
        }
    }
}
