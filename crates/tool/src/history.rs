//! The per-tool execution history (docs/architecture.md, "Observability"): one `tool_executions`
//! row each time a tool does work, or was meant to and did not. Every path that runs a tool
//! operation writes its row through here: the contract server, the gated direct flows, and the
//! lifecycle on the tool's behalf when the tool crashed or the operation was cancelled before it
//! ran.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use gatehouse_domain::contract::{Operation, ValidateExecution};
use gatehouse_domain::{ApiError, ToolCallId};

/// How one operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The operation did what it was asked.
    Ok,
    /// `validate` refused the parameters: the tool worked, the input was wrong.
    Rejected,
    /// The tool answered with a definitive failure.
    Failed,
    /// The tool trapped, timed out or could not be reached.
    Crashed,
    /// A cancel stopped the operation before it ran.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in the order the stats list them.
    pub const ALL: [Outcome; 5] =
        [Outcome::Ok, Outcome::Rejected, Outcome::Failed, Outcome::Crashed, Outcome::Cancelled];

    /// The outcome as `tool_executions.outcome` stores it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Rejected => "rejected",
            Outcome::Failed => "failed",
            Outcome::Crashed => "crashed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Which tool did the work. The version is the component crate's own; `None` when someone
/// other than the tool writes the row (it crashed, or never ran), and the store then takes
/// the version the component last reported.
#[derive(Debug, Clone)]
pub struct ToolIdentity {
    /// The tool's function name.
    pub tool: String,
    /// The component id (or tool host URL) that served it.
    pub component: String,
    /// The component's version, when the component itself writes the row.
    pub version: Option<String>,
}

/// An operation being timed.
#[derive(Debug)]
pub struct Execution {
    identity: ToolIdentity,
    operation: Operation,
    tool_call_id: Option<ToolCallId>,
    tenant: Option<String>,
    trace_id: Option<String>,
    started_at: f64,
    clock: Instant,
}

impl Execution {
    /// Starts timing `operation` of `identity`'s tool for a call (none for `describe`-like work).
    pub fn begin(
        identity: ToolIdentity,
        operation: Operation,
        tool_call_id: Option<&ToolCallId>,
        trace_id: Option<&str>,
    ) -> Execution {
        Execution {
            identity,
            operation,
            tool_call_id: tool_call_id.cloned(),
            tenant: None,
            trace_id: trace_id.map(str::to_owned),
            started_at: SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default(),
            clock: Instant::now(),
        }
    }

    /// Names the tenant the work was for. Without it the row takes its call's tenant, and a
    /// row with no call the first tenant's (docs/architecture.md, "Tenants").
    pub fn for_tenant(mut self, tenant: Option<&str>) -> Execution {
        self.tenant = tenant.map(str::to_owned);
        self
    }

    /// An accepted `validate`'s row, to hand to the caller rather than write (see
    /// [`ValidateExecution`]); the clock stops here.
    pub fn handed_over(&self) -> ValidateExecution {
        ValidateExecution {
            tool: self.identity.tool.clone(),
            component: self.identity.component.clone(),
            component_version: self.identity.version.clone(),
            started_at: self.started_at,
            duration_ms: self.clock.elapsed().as_secs_f64() * 1000.0,
        }
    }

    /// Stops the clock. The error is kept to its bound: a crash's detail may quote whatever a
    /// tool host answered.
    pub fn end(self, outcome: Outcome, error: Option<&str>) -> Finished {
        use gatehouse_domain::limits::{MAX_TOOL_SENTENCE_CHARS, truncate_chars};
        Finished {
            duration_ms: self.clock.elapsed().as_secs_f64() * 1000.0,
            execution: self,
            outcome,
            error: error.map(|text| truncate_chars(text, MAX_TOOL_SENTENCE_CHARS)),
        }
    }
}

/// A timed operation, ready to be recorded.
#[derive(Debug)]
pub struct Finished {
    execution: Execution,
    duration_ms: f64,
    outcome: Outcome,
    error: Option<String>,
}

impl Finished {
    /// Writes the row.
    pub fn write(self) {
        let execution = &self.execution;
        let row = gatehouse_store::ToolExecution {
            tenant: execution.tenant.as_deref(),
            tool: &execution.identity.tool,
            component: &execution.identity.component,
            component_version: execution.identity.version.as_deref(),
            operation: execution.operation.as_str(),
            tool_call_id: execution.tool_call_id.as_ref().map(ToolCallId::as_str),
            started_at: execution.started_at,
            duration_ms: self.duration_ms,
            outcome: self.outcome.as_str(),
            error: self.error.as_deref(),
            trace_id: execution.trace_id.as_deref(),
        };
        write_row(&row);
    }
}

/// The history row of an accepted `validate` that the tool handed to its caller.
pub fn validated_row<'a>(
    execution: &'a ValidateExecution,
    tool_call_id: Option<&'a ToolCallId>,
    trace_id: Option<&'a str>,
) -> gatehouse_store::ToolExecution<'a> {
    gatehouse_store::ToolExecution {
        tenant: None,
        tool: &execution.tool,
        component: &execution.component,
        component_version: execution.component_version.as_deref(),
        operation: Operation::Validate.as_str(),
        tool_call_id: tool_call_id.map(ToolCallId::as_str),
        started_at: execution.started_at,
        duration_ms: execution.duration_ms,
        outcome: Outcome::Ok.as_str(),
        error: None,
        trace_id,
    }
}

/// Writes the row a tool handed over with its accepted `validate`, alone: for a caller that
/// has no statement of its own to write it with (a modify; a create writes it with the call).
pub fn write_validated(execution: &ValidateExecution, tool_call_id: Option<&ToolCallId>, trace_id: Option<&str>) {
    write_row(&validated_row(execution, tool_call_id, trace_id));
}

/// A failure is logged and goes no further: the history must never fail the call it records.
fn write_row(row: &gatehouse_store::ToolExecution<'_>) {
    let written = gatehouse_platform::open_db()
        .and_then(|db| gatehouse_store::record_tool_execution(&db, row).map_err(ApiError::from));
    if let Err(error) = written {
        let problem = error.detail.unwrap_or(error.message);
        gatehouse_platform::log_line("warn", &format!("recording a tool execution: {problem}"));
    }
}

/// Records, on the tool's behalf, an operation that a cancel stopped before it ran.
pub fn record_cancelled(
    identity: ToolIdentity,
    operation: Operation,
    tool_call_id: &ToolCallId,
    trace_id: Option<&str>,
    reason: &str,
) {
    Execution::begin(identity, operation, Some(tool_call_id), trace_id).end(Outcome::Cancelled, Some(reason)).write();
}
