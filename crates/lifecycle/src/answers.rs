//! Every answer the lifecycle's operations give, as types: the REST routes serialize them as
//! their response bodies and the MCP endpoint as its tool results, so both faces say the same
//! thing in the same words. Each serializes to the JSON its route answers (the schemas of
//! `openapi/gatehouse.yaml`): every field listed is always there, `null` when it has no value,
//! unless it says it is left out.
//!
//! Some answers are built whole by the database, as jsonb (see `gatehouse_store`'s `rows.rs`):
//! those types decode that JSON, and their fields follow the SQL that builds it. A call in
//! full is the store's [`ToolCall`] (the SQL function `tool_call_json`). What is genuinely
//! open-ended (a tool's parameters and result, stored session context) stays JSON.

use std::collections::BTreeMap;

use gatehouse_domain::callback::CallbackKind;
use gatehouse_domain::contract::{Operation, ToolDescription, ToolFault};
use gatehouse_domain::{FieldChange, SessionId, Status, ToolCallId};
use gatehouse_store::{ContextView, ToolCall};
use gatehouse_tool::RegistryEntry;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The short answer about one call: its id, its status and the sentence to speak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    pub tool_call_id: ToolCallId,
    pub status: Status,
    pub message: String,
}

/// Where a confirm or a resume left the call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Progress {
    /// Running in the background: the executor has it.
    Running(Brief),
    /// Settled (or at its checkpoint) within the caller's `Prefer: wait`: the call in full.
    Reached(Box<ToolCall>),
    /// A resume whose action was cancel.
    Cancelled(Brief),
}

impl Progress {
    /// The call it is about.
    pub fn tool_call_id(&self) -> &ToolCallId {
        match self {
            Progress::Running(brief) | Progress::Cancelled(brief) => &brief.tool_call_id,
            Progress::Reached(call) => &call.tool_call_id,
        }
    }
}

/// `POST /voice-tools/pending`: the new PENDING call and the sentence to read back. Built by
/// the database with the call (`sql/calls/insert.sql`) and kept, so that a retry with the same
/// `Idempotency-Key` answers exactly the first answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Created {
    pub tool_call_id: ToolCallId,
    /// Always PENDING.
    pub status: Status,
    /// The tool's own name (an alias the client used is resolved).
    pub function_name: String,
    /// The parameters as the tool validated them.
    pub parameters: Map<String, Value>,
    /// The sentence the agent speaks to confirm.
    pub message: String,
    /// What the caller may do next: confirm, modify or cancel.
    pub actions_available: Vec<String>,
    pub expires_at: String,
}

/// `PATCH /voice-tools/modify/:id`: the corrected call, the new sentence to read back, and
/// what changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Modified {
    pub tool_call_id: ToolCallId,
    /// Always PENDING: a correction leaves the call waiting for its confirmation.
    pub status: Status,
    pub updated_parameters: Map<String, Value>,
    pub message: String,
    /// The first changed field, or `None` (`null`) when the patch changed nothing.
    pub modification_applied: Option<FieldChange>,
    /// Every changed field, only when more than one changed; left out otherwise, so a client
    /// that reads one change reads the common case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modifications_applied: Option<Vec<FieldChange>>,
}

impl Modified {
    /// The answer for `changes`, in the order the patch made them.
    pub(crate) fn new(
        tool_call_id: ToolCallId,
        parameters: Map<String, Value>,
        message: String,
        changes: Vec<FieldChange>,
    ) -> Modified {
        Modified {
            tool_call_id,
            status: Status::Pending,
            updated_parameters: parameters,
            message,
            modification_applied: changes.first().cloned(),
            modifications_applied: (changes.len() > 1).then_some(changes),
        }
    }
}

/// `GET /voice-tools/calls`: one page of calls, newest first. Built by the database
/// (`sql/audit/calls.sql`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallsPage {
    pub calls: Vec<ListedCall>,
    /// The `cursor` for the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

/// A call as a list shows it (the SQL function `tool_call_summary_json`): what it is, where it
/// stands and since when, what it is doing, and whether it is overdue, without its histories,
/// checkpoint or result, so that a page has a bounded size whatever its calls went through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedCall {
    pub tool_call_id: ToolCallId,
    pub session_id: SessionId,
    pub connection_id: Option<String>,
    pub intent_id: Option<String>,
    pub function_name: String,
    /// Where the tool is served: a component id, or a tool host's URL (`tool` in the JSON, as
    /// in [`ToolCall`]).
    #[serde(rename = "tool")]
    pub component: String,
    pub parameters: Map<String, Value>,
    /// The effective status: a waiting call past its deadline reads as EXPIRED.
    pub status: Status,
    /// When the call entered its status.
    pub status_since: Option<String>,
    pub summary: Option<String>,
    pub voice_response: Option<String>,
    pub error_message: Option<String>,
    pub attempts: i32,
    pub corrections: i64,
    /// What it is waiting on or doing now: `awaiting_confirmation`, `awaiting_resume`,
    /// `prepare`, `execute`; `None` once final.
    pub current_operation: Option<String>,
    pub next_retry_at: Option<String>,
    pub overdue: bool,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub completed_at: Option<String>,
}

/// `POST /voice-tools/calls/:id/outcome-told`: the relay's mark that the caller heard a settled
/// call's outcome. `first` is true for the one request that made the mark, so of two relays
/// (one restarted mid-conversation) exactly one speaks it. Built by the database
/// (`sql/calls/outcome_told.sql`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeTold {
    pub tool_call_id: ToolCallId,
    pub status: Status,
    pub first: bool,
}

/// `GET /voice-tools/calls/:id/callbacks`: every attempt to deliver the call's callbacks,
/// oldest first. Built by the database (`sql/audit/callbacks.sql`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallbackAttempts {
    pub tool_call_id: ToolCallId,
    pub callbacks: Vec<DeliveryAttempt>,
}

/// One attempt to deliver one of a call's callbacks, with the relay's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeliveryAttempt {
    pub attempt_id: i64,
    pub kind: CallbackKind,
    pub url: String,
    /// 1 for the first try of this callback, 2 for its retry, ...
    pub attempt: i32,
    /// The relay's HTTP status; `None` when no answer came back.
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: f64,
    pub at: String,
}

/// `GET /voice-tools/context/:session`: what the agent needs to know about a session, its
/// open calls and its last settled ones.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionCalls {
    pub session_id: SessionId,
    #[serde(flatten)]
    pub view: ContextView,
}

/// `GET /get-session-context`: a value a tool stored for the session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionContext {
    /// Whatever the tool stored: its shape is the tool's.
    pub context: Value,
}

/// `GET /voice-tools/tools`: every registered tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolList {
    pub tools: Vec<ListedTool>,
}

/// A registered tool: as it describes itself, or, when its component could not be reached,
/// only what the registry knows of it. One tool being down must not hide the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ListedTool {
    Available {
        #[serde(flatten)]
        description: ToolDescription,
        component: String,
        /// Always true.
        available: bool,
    },
    Unavailable {
        name: String,
        aliases: Vec<String>,
        component: String,
        /// Always false.
        available: bool,
        /// Why its `describe` got no answer.
        cause: ToolFault,
    },
}

impl ListedTool {
    /// The registry's `entry`, described by its tool if it answered.
    pub(crate) fn new(entry: RegistryEntry, described: Result<ToolDescription, ToolFault>) -> ListedTool {
        match described {
            Ok(description) => ListedTool::Available { description, component: entry.component, available: true },
            Err(cause) => ListedTool::Unavailable {
                name: entry.name,
                aliases: entry.aliases,
                component: entry.component,
                available: false,
                cause,
            },
        }
    }
}

/// `GET /voice-tools/tools/:name/executions`: one page of a tool's executions, newest first.
/// Built by the database (`sql/history/page.sql`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionsPage {
    /// The tool's name (an alias the client used is resolved).
    pub tool: String,
    pub executions: Vec<RecordedExecution>,
    /// The `cursor` for the next page; `None` on the last one.
    pub next_cursor: Option<String>,
}

/// One operation a tool component ran, or was meant to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedExecution {
    pub execution_id: i64,
    pub tool: String,
    pub component: String,
    pub component_version: String,
    pub operation: Operation,
    /// `None` when there was no recorded call yet (the validation that starts a direct flow).
    pub tool_call_id: Option<ToolCallId>,
    pub started_at: String,
    pub duration_ms: f64,
    /// `ok`, `rejected`, `failed`, `crashed` or `cancelled`.
    pub outcome: String,
    pub error: Option<String>,
    pub trace_id: Option<String>,
}

/// `GET /voice-tools/tools/:name/stats`: a tool's executions over a window. Built by the
/// database (`sql/history/stats.sql`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolStats {
    /// The tool's name (an alias the client used is resolved).
    pub tool: String,
    /// The window as the client asked for it, or `24h`.
    pub window: String,
    pub executions: i64,
    pub outcomes: OutcomeCounts,
    /// `ok / (ok + failed + crashed)`; `None` when that is 0 / 0.
    pub success_rate: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// The same figures for each operation that ran in the window, by its name.
    pub by_operation: BTreeMap<String, OperationStats>,
    /// The window cut into 24 equal buckets, oldest first.
    pub timeline: Vec<TimelineBucket>,
    /// Not limited to the window; `None` if the tool never failed or crashed.
    pub last_error: Option<LastError>,
}

/// A window's executions by how they ended; they add up to its executions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub ok: i64,
    pub rejected: i64,
    pub failed: i64,
    pub crashed: i64,
    pub cancelled: i64,
}

/// One operation's executions in a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OperationStats {
    pub executions: i64,
    pub ok: i64,
    pub p50_ms: f64,
    pub p95_ms: f64,
}

/// One bucket of a window's timeline: the executions that started in it, those that ended
/// `ok`, and those that `failed` or `crashed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineBucket {
    pub start: String,
    pub executions: i64,
    pub ok: i64,
    pub errors: i64,
}

/// A tool's most recent failed or crashed execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastError {
    pub error: Option<String>,
    pub at: String,
    pub operation: Operation,
    /// `failed` or `crashed`.
    pub outcome: String,
    pub tool_call_id: Option<ToolCallId>,
}

/// The drive's answer: it is over, and the call as the walk left it, so a confirm waiting on
/// it (`Prefer: wait`) need not read the call again. An answer without the call (an executor
/// of an earlier version, on another host) leaves the waiter to read it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Driven {
    pub tool_call_id: ToolCallId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<Box<ToolCall>>,
}

/// What one pass of the sweeper did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    pub expired: usize,
    pub failed: usize,
    pub redriven: usize,
    pub reported: usize,
    /// Discards of prepared work retried because an earlier one got no answer from the tool.
    pub discards_retried: usize,
    pub session_context_purged: u64,
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::contract::FaultKind;
    use serde::de::DeserializeOwned;
    use serde_json::json;

    use super::*;

    /// `answer` as its route puts it on the wire.
    fn wire(answer: &impl Serialize) -> Value {
        serde_json::to_value(answer).unwrap_or_else(|e| panic!("an answer serializes: {e}"))
    }

    /// The JSON the database builds decodes as `T`, and re-encodes to the same JSON: no field
    /// lost, none added, `null` kept as `null`.
    fn round_trips<T: DeserializeOwned + Serialize>(from_db: Value) {
        let decoded: T = serde_json::from_value(from_db.clone()).unwrap_or_else(|e| panic!("decodes: {e}"));
        assert_eq!(wire(&decoded), from_db);
    }

    #[test]
    fn one_change_is_named_once_and_several_are_listed() {
        let id = ToolCallId::parse("tc_0123456789ab").expect("an id");
        let change = |field: &str| FieldChange { field: field.into(), old: Some(json!(1)), new: Some(json!(2)) };
        let modified = |changes| wire(&Modified::new(id.clone(), Map::new(), "Send it?".into(), changes));
        let one = modified(vec![change("to")]);
        assert_eq!(one["modification_applied"]["field"], "to");
        assert!(one.get("modifications_applied").is_none());
        let two = modified(vec![change("to"), change("subject")]);
        assert_eq!(two["modifications_applied"].as_array().map(Vec::len), Some(2));
        let none = modified(vec![]);
        assert_eq!((none["modification_applied"].clone(), none["status"].clone()), (Value::Null, json!("PENDING")));
    }

    #[test]
    fn an_added_or_removed_field_reads_null_on_its_missing_side() {
        let id = ToolCallId::parse("tc_0123456789ab").expect("an id");
        let added = FieldChange { field: "cc".into(), old: None, new: Some(json!("a@example.com")) };
        let answer = wire(&Modified::new(id, Map::new(), "Send it?".into(), vec![added]));
        assert_eq!(answer["modification_applied"], json!({"field": "cc", "old": null, "new": "a@example.com"}));
    }

    #[test]
    fn the_create_answer_is_the_one_the_database_kept() {
        round_trips::<Created>(json!({
            "tool_call_id": "tc_0123456789ab", "status": "PENDING", "function_name": "send_email",
            "parameters": {"to": "a@example.com"}, "message": "Send it?",
            "actions_available": ["confirm", "modify", "cancel"], "expires_at": "2026-01-01T10:10:00.000Z"
        }));
    }

    #[test]
    fn a_page_of_calls_keeps_every_summary_field() {
        let call = |id: &str, status: &str, operation: Value| {
            json!({
                "tool_call_id": id, "session_id": "s1", "connection_id": null, "intent_id": "i1",
                "function_name": "send_email", "tool": "gmail", "parameters": {"to": "a@example.com"},
                "status": status, "status_since": "2026-01-01T10:00:00.000Z", "summary": "Send it?",
                "voice_response": null, "error_message": null, "attempts": 0, "corrections": 1,
                "current_operation": operation, "next_retry_at": null, "overdue": false,
                "expires_at": "2026-01-01T10:10:00.000Z", "created_at": "2026-01-01T10:00:00.000Z",
                "completed_at": null
            })
        };
        round_trips::<CallsPage>(json!({
            "calls": [call("tc_0123456789ab", "PENDING", json!("awaiting_confirmation")),
                      call("tc_0123456789ac", "EXPIRED", Value::Null)],
            "next_cursor": "1763840000123456_tc_0123456789ac"
        }));
        round_trips::<CallsPage>(json!({"calls": [], "next_cursor": null}));
    }

    #[test]
    fn an_outcome_told_says_whether_it_was_first() {
        round_trips::<OutcomeTold>(json!({"tool_call_id": "tc_0123456789ab", "status": "COMPLETED", "first": true}));
    }

    #[test]
    fn callback_attempts_keep_a_missing_answer_as_null() {
        round_trips::<CallbackAttempts>(json!({
            "tool_call_id": "tc_0123456789ab",
            "callbacks": [
                {"attempt_id": 7, "kind": "completion", "url": "https://relay.example/cb", "attempt": 1,
                 "status_code": null, "error": "the relay could not be reached", "duration_ms": 12.5,
                 "at": "2026-01-01T10:00:00.000Z"},
                {"attempt_id": 8, "kind": "completion", "url": "https://relay.example/cb", "attempt": 2,
                 "status_code": 200, "error": null, "duration_ms": 3.0, "at": "2026-01-01T10:00:01.000Z"}
            ]
        }));
    }

    #[test]
    fn a_page_of_executions_names_its_tool() {
        round_trips::<ExecutionsPage>(json!({
            "tool": "send_email",
            "executions": [{
                "execution_id": 42, "tool": "send_email", "component": "gmail", "component_version": "0.1.0",
                "operation": "validate", "tool_call_id": null, "started_at": "2026-01-01T10:00:00.000Z",
                "duration_ms": 1.25, "outcome": "rejected", "error": "No address.", "trace_id": null
            }],
            "next_cursor": null
        }));
    }

    #[test]
    fn stats_keep_an_undefined_rate_and_no_last_error_as_null() {
        let bucket = json!({"start": "2026-01-01T10:00:00.000Z", "executions": 0, "ok": 0, "errors": 0});
        round_trips::<ToolStats>(json!({
            "tool": "send_email", "window": "24h", "executions": 0,
            "outcomes": {"ok": 0, "rejected": 0, "failed": 0, "crashed": 0, "cancelled": 0},
            "success_rate": null, "p50_ms": null, "p95_ms": null, "by_operation": {},
            "timeline": vec![bucket; 24], "last_error": null
        }));
        round_trips::<ToolStats>(json!({
            "tool": "send_email", "window": "7d", "executions": 3,
            "outcomes": {"ok": 2, "rejected": 0, "failed": 0, "crashed": 1, "cancelled": 0},
            "success_rate": 0.6667, "p50_ms": 10.5, "p95_ms": 20.25,
            "by_operation": {"execute": {"executions": 3, "ok": 2, "p50_ms": 10.5, "p95_ms": 20.25}},
            "timeline": [{"start": "2026-01-01T10:00:00.000Z", "executions": 3, "ok": 2, "errors": 1}],
            "last_error": {"error": "trap", "at": "2026-01-01T10:00:00.000Z", "operation": "execute",
                           "outcome": "crashed", "tool_call_id": "tc_0123456789ab"}
        }));
    }

    #[test]
    fn a_tool_is_listed_as_it_describes_itself_or_as_the_registry_knows_it() {
        let entry =
            RegistryEntry { name: "send_email".into(), aliases: vec!["email".into()], component: "gmail".into() };
        let description = ToolDescription {
            name: "send_email".into(),
            aliases: vec!["email".into()],
            description: "Sends an email.".into(),
            parameters_schema: json!({"type": "object"}),
            needs_checkpoint: true,
            version: "0.1.0".into(),
            effects: None,
        };
        let mut expected = serde_json::to_value(&description).expect("a description serializes");
        expected["component"] = json!("gmail");
        expected["available"] = json!(true);
        assert_eq!(wire(&ListedTool::new(entry.clone(), Ok(description))), expected);
        assert!(expected.get("effects").is_none(), "a tool that says nothing of its effects has none listed");
        let cause = ToolFault::new(FaultKind::TimedOut, "no answer from component gmail within 5000 ms");
        let unavailable = json!({"name": "send_email", "aliases": ["email"], "component": "gmail", "available": false,
                                 "cause": {"kind": "timed_out", "explanation": "no answer from component gmail within 5000 ms"}});
        assert_eq!(wire(&ListedTool::new(entry, Err(cause))), unavailable);
        round_trips::<ToolList>(json!({"tools": [expected, unavailable]}));
    }

    #[test]
    fn session_context_is_the_stored_value_under_context() {
        let answer = SessionContext { context: json!({"last_query_results": [1, 2]}) };
        assert_eq!(wire(&answer), json!({"context": {"last_query_results": [1, 2]}}));
    }

    #[test]
    fn progress_names_its_call_however_far_it_came() {
        let id = ToolCallId::parse("tc_0123456789ab").expect("an id");
        let brief = Brief { tool_call_id: id.clone(), status: Status::Executing, message: "On it.".into() };
        assert_eq!(Progress::Running(brief.clone()).tool_call_id(), &id);
        assert_eq!(Progress::Cancelled(brief).tool_call_id(), &id);
    }
}
