//! The gated direct flows of SPEC §7 (`POST /execute-gmail`, `POST /query-vector-db`): one
//! request that is both the create and the confirm, and that stops at gates where the relay
//! must say "continue".
//!
//! The flow records an ordinary `tool_calls` row and moves it with the same conditional
//! transitions as the REST lifecycle, under its own lease. So a cancel through
//! `DELETE /voice-tools/cancel/:id` races it exactly as it races the executor, and a flow whose
//! component dies is re-driven by the sweeper like any stranded call.

use std::future::Future;

use gatehouse_domain::callback::RelayDecision;
use gatehouse_domain::contract::{Checkpoint, Executed, Operation, ToolRequest};
use gatehouse_domain::{ApiError, SessionId, Status};
use gatehouse_http::Component;
use gatehouse_store::{Connection, Created, NewCall, ToolCall, Transition};
use gatehouse_tool::history::{Execution, Outcome, ToolIdentity};
use gatehouse_tool::{Tool, ToolFailure};
use serde_json::{Map, Value};

use crate::cancel::{after_cancel, cancelled_message};
use crate::drive::tool_request;
use crate::{Config, callbacks};

/// What a direct flow records before its first gate.
#[derive(Debug, Clone)]
pub struct FlowStart<'a> {
    pub function_name: &'a str,
    /// The component id of the tool.
    pub tool: &'a str,
    pub session_id: &'a SessionId,
    pub intent_id: Option<&'a str>,
    pub connection_id: Option<&'a str>,
    /// Already validated by the tool.
    pub parameters: &'a Map<String, Value>,
    pub summary: &'a str,
    /// Required: a gate with nobody to ask could only ever cancel.
    pub callback_url: &'a str,
    pub trace_id: &'a str,
}

/// What every direct flow's request carries besides the tool's own parameters.
#[derive(Debug, Clone)]
pub struct FlowFields {
    pub session_id: String,
    pub intent_id: Option<String>,
    pub connection_id: Option<String>,
    pub callback_url: String,
}

/// Checks a direct flow's request with the tool itself (`validate`, then `check_references`),
/// and records the call: nothing is written for a request the tool refuses. The tool runs in
/// `component`, whose id is its crate's name.
pub fn start<T: Tool>(
    tool: &T,
    component: Component,
    fields: &FlowFields,
    parameters: Map<String, Value>,
) -> Result<GatedFlow, ApiError> {
    let session_id = crate::session_id(&fields.session_id)?;
    let identity = gatehouse_tool::identity(tool, component);
    let trace_id = gatehouse_http::trace_id();
    let validation = Execution::begin(identity.clone(), Operation::Validate, None, Some(&trace_id));
    let validated =
        tool.validate(parameters).and_then(|parameters| match tool.check_references(&parameters, Some(&session_id)) {
            problems if problems.is_empty() => Ok(parameters),
            problems => Err(problems),
        });
    let refused = "Some of the details aren't valid.";
    let outcome = if validated.is_ok() { Outcome::Ok } else { Outcome::Rejected };
    validation.end(outcome, validated.is_err().then_some(refused)).write();
    let parameters = validated.map_err(|problems| ApiError::validation_failed(refused, problems))?;
    let summary = tool.summarize(&parameters);
    let start = FlowStart {
        function_name: &identity.tool,
        tool: component.name,
        session_id: &session_id,
        intent_id: fields.intent_id.as_deref(),
        connection_id: fields.connection_id.as_deref(),
        parameters: &parameters,
        summary: &summary,
        callback_url: &fields.callback_url,
        trace_id: &trace_id,
    };
    GatedFlow::begin(&gatehouse_http::open_db()?, start, identity.clone())
}

/// Whether the flow may go on.
#[derive(Debug)]
pub enum Passage {
    Continue,
    /// The call ended without its side effect: cancelled at a gate or by a cancel request,
    /// or expired. The call as it is now.
    Stopped(Box<ToolCall>),
}

/// A direct flow in progress: the call it owns, and the lease that proves it.
#[derive(Debug)]
pub struct GatedFlow {
    call: ToolCall,
    lease_owner: String,
    /// The tool in this component, for the history rows of the work the flow runs in-process.
    identity: ToolIdentity,
}

/// A connection per step: gates wait on a person, and nothing may hold a pooled connection
/// through that.
fn db() -> Result<Connection, ApiError> {
    gatehouse_http::open_db()
}

impl GatedFlow {
    /// Records the call and takes it straight to EXECUTING: the request itself is the caller's
    /// confirmation.
    pub fn begin(db: &Connection, start: FlowStart<'_>, identity: ToolIdentity) -> Result<GatedFlow, ApiError> {
        let callback_url = Config::checked_callback_url(Some(start.callback_url))?;
        let id = gatehouse_http::new_tool_call_id();
        let new_call = NewCall {
            tool_call_id: &id,
            session_id: start.session_id,
            connection_id: start.connection_id,
            intent_id: start.intent_id,
            function_name: start.function_name,
            tool: start.tool,
            parameters: start.parameters,
            summary: start.summary,
            callback_url: callback_url.as_deref(),
            idempotency_key: None,
            request_fingerprint: "",
            trace_id: start.trace_id,
            ttl_seconds: Config::pending_ttl_seconds()?,
        };
        if !matches!(gatehouse_store::insert_call(db, &new_call)?, Created::New(_)) {
            return Err(ApiError::internal().with_detail("a new call without an Idempotency-Key was not created"));
        }
        let lease_owner = gatehouse_http::new_token();
        match gatehouse_store::confirm_call(db, &id, &lease_owner, Config::lease_seconds()?, callback_url.as_deref())? {
            Transition::Applied { after, .. } => Ok(GatedFlow { call: *after, lease_owner, identity }),
            _ => Err(ApiError::internal().with_detail(format!("{id} could not be confirmed right after its creation"))),
        }
    }

    pub fn call(&self) -> &ToolCall {
        &self.call
    }

    /// The contract request for the tool's own operations on this call.
    pub fn tool_request(&self) -> ToolRequest {
        ToolRequest { checkpoint: self.call.checkpoint.clone(), ..tool_request(&self.call) }
    }

    /// Tells the relay the flow reached `gate`, before the tool's `next` operation, and waits
    /// for its answer. Only an explicit continue goes on; anything else cancels the call
    /// (SPEC §6: fail closed), and the history shows `next` as cancelled.
    pub async fn gate(
        &mut self,
        gate: &str,
        next: Operation,
        progress: &str,
        requires_confirmation: bool,
    ) -> Result<Passage, ApiError> {
        let waiting = self.execution(next);
        let answer = callbacks::gate(&self.call, gate, progress, requires_confirmation).await;
        let (status, body) = answer.map_or((None, Vec::new()), |a| (Some(a.status), a.body));
        match RelayDecision::at_gate(status, &body) {
            RelayDecision::Continue => Ok(Passage::Continue),
            RelayDecision::Cancel { reason } => {
                let reason = format!("at {gate}: {reason}");
                waiting.end(Outcome::Cancelled, Some(&reason)).write();
                self.cancel(&reason).await
            }
        }
    }

    /// Runs one of the tool's operations in-process, and records it in the tool's history as
    /// the contract server would.
    pub async fn run<T>(
        &self,
        operation: Operation,
        work: impl Future<Output = Result<T, ToolFailure>>,
    ) -> Result<T, ToolFailure> {
        let execution = self.execution(operation);
        let outcome = work.await;
        match &outcome {
            Ok(_) => execution.end(Outcome::Ok, None),
            Err(failure) => execution.end(Outcome::Failed, Some(&failure.message)),
        }
        .write();
        outcome
    }

    fn execution(&self, operation: Operation) -> Execution {
        let call = &self.call;
        Execution::begin(self.identity.clone(), operation, Some(&call.tool_call_id), call.trace_id.as_deref())
    }

    /// Records the checkpoint `prepare` returned: the call is PREPARED until the next gate.
    pub fn prepared(&mut self, checkpoint: &Checkpoint) -> Result<Passage, ApiError> {
        let ttl = Config::checkpoint_ttl_seconds()?;
        let moved =
            gatehouse_store::mark_prepared(&db()?, &self.call.tool_call_id, &self.lease_owner, checkpoint, ttl)?;
        self.follow(moved)
    }

    /// The point of no return, raced against cancel like the executor's. A PREPARED call is
    /// resumed first: passing the gate after the checkpoint is the relay's "proceed".
    pub fn begin_side_effect(&mut self) -> Result<Passage, ApiError> {
        let id = self.call.tool_call_id.clone();
        let lease_seconds = Config::lease_seconds()?;
        if self.call.status == Status::Prepared {
            let resumed = gatehouse_store::resume_call(&db()?, &id, &self.lease_owner, lease_seconds)?;
            if let Passage::Stopped(call) = self.follow(resumed)? {
                return Ok(Passage::Stopped(call));
            }
        }
        let started = gatehouse_store::begin_side_effect(&db()?, &id, &self.lease_owner, lease_seconds)?;
        self.follow(started)
    }

    /// Records COMPLETED, or FAILED with the tool's sentence, and delivers the completion
    /// callback before the flow answers (the last gate).
    pub async fn finish(&mut self, outcome: Result<Executed, ToolFailure>) -> Result<ToolCall, ApiError> {
        let id = &self.call.tool_call_id.clone();
        let owner = &self.lease_owner.clone();
        let settled = match &outcome {
            Ok(executed) => {
                gatehouse_store::complete_call(&db()?, id, owner, &executed.result, &executed.voice_response)?
            }
            Err(failure) => {
                let reason = format!("execute failed: {}", failure.message);
                gatehouse_store::fail_call(&db()?, id, owner, &reason, &failure.message)?
            }
        };
        match settled {
            Transition::Applied { after, .. } => {
                callbacks::completion(&after).await;
                self.call = *after;
            }
            Transition::Rejected { current } => self.call = *current,
            Transition::NotFound => return Err(ApiError::internal().with_detail(format!("{id} vanished while it ran"))),
        }
        Ok(self.call.clone())
    }

    async fn cancel(&mut self, reason: &str) -> Result<Passage, ApiError> {
        let message = cancelled_message(self.call.status);
        let cancelled = gatehouse_store::cancel_call(&db()?, &self.call.tool_call_id, Some(reason), "relay", message)?;
        match cancelled {
            Transition::Applied { before, after } => {
                let checkpoint = if before.status == Status::Prepared { before.checkpoint.clone() } else { None };
                after_cancel((*after).clone(), checkpoint).await;
                Ok(Passage::Stopped(after))
            }
            other => self.follow(other),
        }
    }

    /// Takes the outcome of one of the flow's own transitions: applied, the flow goes on with
    /// the new state; refused, someone else (a cancel, the sweeper) decided the call's fate.
    fn follow(&mut self, transition: Transition) -> Result<Passage, ApiError> {
        match transition {
            Transition::Applied { after, .. } => {
                self.call = *after;
                Ok(Passage::Continue)
            }
            Transition::Rejected { current } => Ok(Passage::Stopped(current)),
            Transition::NotFound => {
                Err(ApiError::internal().with_detail(format!("{} vanished while it ran", self.call.tool_call_id)))
            }
        }
    }
}
