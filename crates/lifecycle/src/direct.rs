//! The gated direct flows (`POST /execute-gmail`, `POST /query-vector-db`; docs/architecture.md,
//! "Direct flows"): one request that is both the create and the confirm, and that stops at
//! gates where the relay must say "continue".
//!
//! The flow records an ordinary `tool_calls` row and walks it through the same
//! [`flow`](crate::flow) as the executor, under its own lease. So a cancel through
//! `DELETE /voice-tools/cancel/:id` races it exactly as it races the executor, and a flow whose
//! component dies is re-driven by the sweeper like any stranded call. What differs is the
//! policy between the steps: the relay is asked at each gate and the flow fails closed
//! (anything but an explicit continue cancels), and the tool runs in this component.

use gatehouse_domain::callback::RelayDecision;
use gatehouse_domain::contract::{Checkpoint, Executed, Operation, ToolRequest, Validated};
use gatehouse_domain::{ApiError, SessionId, SessionOf, ToolCallId};
use gatehouse_platform::{Component, OutboundResponse};
use gatehouse_store::{Caller, Insertion, NewCall, ToolCall, Transition};
use gatehouse_tool::history::{Execution, Outcome as Ran, ToolIdentity, validated_row};
use gatehouse_tool::{Tool, ToolError, ToolFailure};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::flow::{After, Decision, Policy};
use crate::{Ctx, callbacks, flow};

/// A gate: where the flow stops until the relay says "continue".
#[derive(Debug, Clone, Copy)]
pub struct Gate {
    /// The gate's name in the progress callback (`PREPARING`).
    pub name: &'static str,
    /// What the relay may tell the caller meanwhile.
    pub progress: &'static str,
}

/// A direct flow, declared by its gates.
#[derive(Debug, Clone, Copy)]
pub struct DirectFlow {
    /// Before the tool does any work. The relay may still cancel; nothing has happened yet.
    pub before_work: Gate,
    /// `Some` for a tool that prepares first: the gate at its checkpoint, where the relay
    /// confirms with the caller, and which tells the relay the checkpoint's own message.
    /// `None`: the tool goes straight to `execute` after the first gate.
    pub at_checkpoint: Option<&'static str>,
}

/// What every direct flow's request carries besides the tool's own parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    pub session_id: String,
    #[serde(default)]
    pub intent_id: Option<String>,
    #[serde(default)]
    pub connection_id: Option<String>,
    /// Required: a gate with nobody to ask could only ever cancel.
    pub callback_url: String,
}

impl Envelope {
    /// The envelope's fields, which a request body carries beside the tool's own.
    pub const FIELDS: [&'static str; 4] = ["session_id", "intent_id", "connection_id", "callback_url"];

    /// Every label and the URL within its bound (`gatehouse_domain::limits`).
    fn check_bounds(&self) -> Result<(), ApiError> {
        use gatehouse_domain::limits::{MAX_LABEL_CHARS, MAX_URL_CHARS, check_length, check_optional_length};
        check_optional_length("intent_id", self.intent_id.as_deref(), MAX_LABEL_CHARS)?;
        check_optional_length("connection_id", self.connection_id.as_deref(), MAX_LABEL_CHARS)?;
        check_length("callback_url", &self.callback_url, MAX_URL_CHARS)
    }
}

impl DirectFlow {
    /// Checks the request with the tool itself (`validate`, then `check_references`; nothing is
    /// written for a request the tool refuses), records the call, walks it through the gates
    /// and delivers the last callback. The call as the flow left it.
    pub async fn run<T: Tool>(
        &self,
        ctx: &Ctx,
        tool: &T,
        component: Component,
        envelope: &Envelope,
        parameters: Map<String, Value>,
    ) -> Result<ToolCall, ApiError> {
        let session_id = crate::session_id(&envelope.session_id)?;
        envelope.check_bounds()?;
        gatehouse_domain::limits::check_parameters_size(&parameters)?;
        let identity = gatehouse_tool::identity(tool, component);
        let trace_id = gatehouse_platform::trace_id();
        crate::create::refuse_past_limits(ctx)?;
        let session = ctx.session(&session_id)?;
        let validated = validate(tool, &identity, session, parameters, &trace_id)?;
        let (call, lease_owner) = record(ctx, &identity, envelope, &session_id, &validated, &trace_id)?;
        let mut policy = InProcess { ctx: ctx.clone(), flow: *self, tool, identity, waiting: None };
        let walked = flow::walk(ctx, call, &lease_owner, &mut policy).await?;
        After::run_all(ctx.clone(), walked.after).await;
        Ok(walked.call)
    }
}

/// The tool's own checks ([`gatehouse_tool::accept`]). A refusal's history row is written
/// here; an acceptance's is answered, for the call's insert to write with the call, as a
/// create does.
fn validate<T: Tool>(
    tool: &T,
    identity: &ToolIdentity,
    session: SessionOf<'_>,
    parameters: Map<String, Value>,
    trace_id: &str,
) -> Result<Validated, ApiError> {
    let validation =
        Execution::begin(identity.clone(), Operation::Validate, None, Some(trace_id)).for_tenant(Some(session.tenant));
    gatehouse_tool::accept(tool, &tool.describe(), parameters, Some(session), &validation).map_err(|refusal| {
        validation.end(Ran::Rejected, Some(&refusal.error)).write();
        ApiError::validation_failed(refusal.error, refusal.fields)
    })
}

/// Records the call, with its `validate` row, and takes it straight to EXECUTING under a
/// lease of the flow's own: the request itself is the caller's confirmation.
fn record(
    ctx: &Ctx,
    identity: &ToolIdentity,
    envelope: &Envelope,
    session_id: &SessionId,
    validated: &Validated,
    trace_id: &str,
) -> Result<(ToolCall, String), ApiError> {
    let config = ctx.config();
    let grant = ctx.grant()?;
    let callback_url = config.checked_callback_url(grant, Some(&envelope.callback_url))?;
    let id = gatehouse_platform::new_tool_call_id();
    let new_call = NewCall {
        tool_call_id: &id,
        session_id,
        connection_id: envelope.connection_id.as_deref(),
        intent_id: envelope.intent_id.as_deref(),
        function_name: &identity.tool,
        component: &identity.component,
        parameters: &validated.parameters,
        summary: &validated.summary,
        callback_url: callback_url.as_deref(),
        idempotency_key: None,
        request_fingerprint: "",
        trace_id,
        ttl_seconds: config.pending_ttl_seconds()?,
        needs_checkpoint: validated.needs_checkpoint,
        validation: validated.execution.as_ref().map(|e| validated_row(e, None, Some(trace_id))),
        max_pending_per_session: config.max_pending_per_session()?,
        grant,
    };
    let db = ctx.db()?;
    // The flow answers with the call as it ends, not with the create's answer: that is not read.
    match gatehouse_store::insert_call::<serde::de::IgnoredAny>(&db, &new_call)? {
        Insertion::New(_) => {}
        Insertion::Limited(limit) => {
            return Err(crate::create::limited(limit, config.max_pending_per_session()?));
        }
        Insertion::Existing { .. } | Insertion::Raced => {
            return Err(ApiError::internal().with_detail("a new call without an Idempotency-Key was not created"));
        }
    }
    let lease_owner = gatehouse_platform::new_token();
    match gatehouse_store::confirm_call(
        &db,
        Caller::Key(grant),
        &id,
        &lease_owner,
        config.lease_seconds()?,
        callback_url.as_deref(),
    )? {
        Transition::Applied { after, .. } => Ok((*after, lease_owner)),
        _ => Err(ApiError::internal().with_detail(format!("{id} could not be confirmed right after its creation"))),
    }
}

/// The direct flows' policy: ask the relay at every gate and fail closed; run the tool in
/// this component and write its history rows as the contract server would.
struct InProcess<'a, T> {
    ctx: Ctx,
    flow: DirectFlow,
    tool: &'a T,
    identity: ToolIdentity,
    /// The operation the relay cancelled at a gate, timed from the gate's start, for its
    /// history row once the cancel has won.
    waiting: Option<Execution>,
}

impl<T: Tool> InProcess<'_, T> {
    fn execution(&self, operation: Operation, id: Option<&ToolCallId>, trace_id: Option<&str>) -> Execution {
        Execution::begin(self.identity.clone(), operation, id, trace_id)
    }

    /// Tells the relay the flow reached `gate`, before `next`, and waits for its answer. Only
    /// an explicit continue goes on; anything else cancels the call: a gate fails closed
    /// (docs/architecture.md, "Direct flows").
    async fn gate(&mut self, call: &ToolCall, gate: &str, progress: &str, next: Operation, confirm: bool) -> Decision {
        let waiting = self.execution(next, Some(&call.tool_call_id), call.trace_id.as_deref());
        let decision = gate_decision(gate, next, callbacks::gate(&self.ctx, call, gate, progress, confirm).await);
        if let Decision::Cancel { .. } = decision {
            self.waiting = Some(waiting);
        }
        decision
    }
}

/// The relay's answer at `gate`, before `next`: only an explicit continue goes on; no answer,
/// an error or anything else cancels (a gate fails closed: docs/architecture.md, "Direct
/// flows"), and the reason names the gate.
fn gate_decision(gate: &str, next: Operation, answer: Option<OutboundResponse>) -> Decision {
    let (status, body) = answer.map_or((None, Vec::new()), |a| (Some(a.status), a.body));
    match RelayDecision::at_gate(status, &body) {
        RelayDecision::Continue => Decision::Continue,
        RelayDecision::Cancel { reason } => {
            Decision::Cancel { reason: format!("at {gate}: {reason}"), operation: next }
        }
    }
}

/// The history row of an operation run here, as the contract server would write it; a
/// failure the tool reports is its definitive answer, as a refusal over the contract is.
fn ran<R>(execution: Execution, outcome: Result<R, ToolFailure>) -> Result<R, ToolError> {
    match &outcome {
        Ok(_) => execution.end(Ran::Ok, None),
        Err(failure) => execution.end(Ran::Failed, Some(&failure.message)),
    }
    .write();
    outcome.map_err(ToolFailure::into_error)
}

impl<T: Tool> Policy for InProcess<'_, T> {
    fn needs_checkpoint(&self) -> bool {
        self.flow.at_checkpoint.is_some()
    }

    async fn before_work(&mut self, call: &ToolCall) -> Decision {
        let Gate { name, progress } = self.flow.before_work;
        let next = if self.flow.at_checkpoint.is_some() { Operation::Prepare } else { Operation::Execute };
        self.gate(call, name, progress, next, false).await
    }

    async fn at_checkpoint(&mut self, call: &ToolCall, checkpoint: &Checkpoint) -> Decision {
        match self.flow.at_checkpoint {
            Some(gate) => self.gate(call, gate, &checkpoint.message, Operation::Execute, true).await,
            None => Decision::Continue,
        }
    }

    async fn prepare(&mut self, request: &ToolRequest) -> Result<Option<Checkpoint>, ToolError> {
        if self.flow.at_checkpoint.is_none() {
            return Ok(None);
        }
        let execution = self.execution(Operation::Prepare, request.tool_call_id.as_ref(), request.trace_id.as_deref());
        ran(execution, self.tool.prepare(request).await)
    }

    async fn execute(&mut self, request: &ToolRequest) -> Result<Executed, ToolError> {
        let execution = self.execution(Operation::Execute, request.tool_call_id.as_ref(), request.trace_id.as_deref());
        ran(execution, self.tool.execute(request).await)
    }

    fn cancelled(&mut self, call: &ToolCall, operation: Operation, reason: &str) {
        let waiting = self.waiting.take();
        let execution =
            waiting.unwrap_or_else(|| self.execution(operation, Some(&call.tool_call_id), call.trace_id.as_deref()));
        execution.end(Ran::Cancelled, Some(reason)).write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::answered;

    #[test]
    fn a_gate_goes_on_only_when_the_relay_says_continue() {
        let decide = |answer| gate_decision("READY_TO_SEND", Operation::Execute, answer);
        assert_eq!(decide(answered(200, r#"{"continue": true}"#)), Decision::Continue);
        let cancelled = |reason: &str| Decision::Cancel {
            reason: format!("at READY_TO_SEND: {reason}"),
            operation: Operation::Execute,
        };
        assert_eq!(decide(None), cancelled("the relay could not be reached"));
        assert_eq!(decide(answered(503, r#"{"continue": true}"#)), cancelled("the relay answered HTTP 503"));
        assert_eq!(decide(answered(200, "{}")), cancelled("the relay did not say continue"));
        assert_eq!(decide(answered(200, "yes")), cancelled("the relay did not say continue"));
        assert_eq!(decide(answered(200, r#"{"cancel": true, "reason": "wrong person"}"#)), cancelled("wrong person"));
    }

    #[test]
    fn the_envelope_lists_its_own_fields() {
        let body = serde_json::json!({"session_id": "s", "callback_url": "https://relay.example/cb"});
        let envelope: Envelope = serde_json::from_value(body).expect("an envelope");
        assert_eq!((envelope.intent_id, envelope.connection_id), (None, None));
        let every_field: serde_json::Map<String, Value> =
            Envelope::FIELDS.iter().map(|name| ((*name).to_owned(), Value::String("x".into()))).collect();
        assert!(serde_json::from_value::<Envelope>(Value::Object(every_field)).is_ok(), "FIELDS names every field");
    }
}
