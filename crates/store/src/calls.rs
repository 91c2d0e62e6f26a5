//! The tool-call state machine (docs/architecture.md, "The lifecycle"), one statement per
//! transition (docs/architecture.md, "One statement per transition").
//!
//! Every transition is a single conditional UPDATE that also appends its `status_history`
//! entry, so it is atomic and commits once. Each returns the call as it was before and, if the
//! condition held, as it is after: a caller whose transition lost learns the current state
//! without a second query.
//!
//! Every statement answers exactly one row, even for an unknown id (see `rows.rs`): before and
//! after are scalar subqueries, NULL when there is no call or the condition did not hold.

use gatehouse_domain::contract::Checkpoint;
use gatehouse_domain::keys::Grant;
use gatehouse_domain::{SessionId, SessionOf, Status, ToolCallId};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::history::{ToolExecution, history_parameters};
use crate::rows::{decode, one_row, optional, optional_text, text};
use crate::{Caller, StoreError};

/// A call as the routes report it (the SQL function `tool_call_json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub tool_call_id: ToolCallId,
    pub session_id: SessionId,
    /// The tenant it belongs to (docs/architecture.md, "Tenants").
    #[serde(default = "default_tenant")]
    pub tenant: String,
    pub connection_id: Option<String>,
    pub intent_id: Option<String>,
    pub function_name: String,
    /// Where the tool is served: a component id, or a tool host's URL (`tool` in the API's JSON).
    #[serde(rename = "tool")]
    pub component: String,
    pub parameters: Map<String, Value>,
    pub parameters_history: Vec<Value>,
    /// The effective status: a waiting call past its deadline reads as EXPIRED.
    pub status: Status,
    pub status_history: Vec<Value>,
    pub summary: Option<String>,
    /// What `prepare` left: the checkpoint message and the tool's own state.
    pub checkpoint: Option<Checkpoint>,
    pub result: Option<Value>,
    pub error_message: Option<String>,
    pub voice_response: Option<String>,
    pub callback_url: Option<String>,
    pub expires_at: Option<String>,
    pub attempts: i32,
    pub side_effect_started_at: Option<String>,
    pub trace_id: Option<String>,
    pub created_at: String,
    /// When the call entered its status.
    #[serde(default)]
    pub status_since: Option<String>,
    /// How many corrections it took.
    #[serde(default)]
    pub corrections: i64,
    /// What it is waiting on or doing now: `awaiting_confirmation`, `awaiting_resume`,
    /// `prepare`, `execute`; `None` once final.
    #[serde(default)]
    pub current_operation: Option<String>,
    /// When a failed attempt is tried again.
    #[serde(default)]
    pub next_retry_at: Option<String>,
    /// Past the time it should have moved by (see `tool_call_summary_json`).
    #[serde(default)]
    pub overdue: bool,
    pub confirmed_at: Option<String>,
    pub prepared_at: Option<String>,
    pub executed_at: Option<String>,
    pub completed_at: Option<String>,
    pub execution_time_ms: Option<i64>,
}

fn default_tenant() -> String {
    gatehouse_domain::keys::DEFAULT_TENANT.to_owned()
}

impl ToolCall {
    /// The call's session, as its tenant names it.
    pub fn session(&self) -> SessionOf<'_> {
        SessionOf { tenant: &self.tenant, session_id: &self.session_id }
    }
}

/// The outcome of a conditional transition.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// No call has this id.
    NotFound,
    /// The condition held; the call after the change.
    Applied { before: Box<ToolCall>, after: Box<ToolCall> },
    /// The call was not in a state that allows the change; as it was when the statement began.
    Rejected { current: Box<ToolCall> },
}

/// A call to create.
#[derive(Debug, Clone)]
pub struct NewCall<'a> {
    pub tool_call_id: &'a ToolCallId,
    pub session_id: &'a SessionId,
    pub connection_id: Option<&'a str>,
    pub intent_id: Option<&'a str>,
    pub function_name: &'a str,
    /// The component that serves the tool.
    pub component: &'a str,
    pub parameters: &'a Map<String, Value>,
    pub summary: &'a str,
    pub callback_url: Option<&'a str>,
    pub idempotency_key: Option<&'a str>,
    pub request_fingerprint: &'a str,
    pub trace_id: &'a str,
    pub ttl_seconds: f64,
    /// Whether the tool stops at a checkpoint, as its `validate` (or its description) said.
    pub needs_checkpoint: bool,
    /// The history row the tool handed over with its `validate`, written in the same statement
    /// as the call (`None`: the tool wrote it itself).
    pub validation: Option<ToolExecution<'a>>,
    /// How many waiting PENDING calls the session may hold; a create past it is refused.
    pub max_pending_per_session: i64,
    /// Whose call it is: its tenant, and the key named in its first status entry.
    pub grant: &'a Grant,
}

/// A call as the executor reads it before driving it.
#[derive(Debug, Clone, Deserialize)]
pub struct CallToDrive {
    pub call: ToolCall,
    /// Whether its tool stops at a checkpoint; without one, `prepare` has nothing to do.
    pub needs_checkpoint: bool,
}

/// What a create did. The answer is built by the database with the call and kept with it
/// (`create_response`), decoded as the caller's type for it, `T`.
#[derive(Debug, Clone, PartialEq)]
pub enum Insertion<T> {
    /// The 201 body of the new call.
    New(T),
    /// A call with this Idempotency-Key exists: its request fingerprint and its first answer.
    Existing { fingerprint: String, response: T },
    /// The key's first call was being created concurrently and is not visible yet; retry.
    Raced,
    /// A limit was met and nothing was created.
    Limited(Limit),
}

/// A limit a create met (docs/keys.md, "Limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The session holds as many waiting PENDING calls as it may.
    SessionFull,
    /// The tenant holds as many waiting PENDING calls as it may.
    TenantFull,
    /// The tenant created as many calls in the last second as it may.
    RateLimited,
}

/// One entry for `parameters_history`, before the database stamps it.
#[derive(Debug, Clone, Serialize)]
pub struct ParameterChange {
    pub field: String,
    pub old_value: Option<Value>,
    pub new_value: Option<Value>,
}

/// A stranded execution the sweeper took over, with the new lease.
#[derive(Debug, Clone, Deserialize)]
pub struct Claim {
    pub tool_call_id: ToolCallId,
    pub lease_owner: String,
    pub trace_id: Option<String>,
}

/// An expired call, and whether it had reached the checkpoint (so the tool must discard).
#[derive(Debug, Clone, Deserialize)]
pub struct ExpiredCall {
    #[serde(flatten)]
    pub call: ToolCall,
    pub was_prepared: bool,
}

/// The calls one or more expiry statements changed.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Expiry {
    /// Calls with someone to hear of it: a relay to tell, or prepared work for the tool to
    /// discard.
    pub to_follow_up: Vec<ExpiredCall>,
    /// Calls with nobody to tell (no callback URL of their own, no default, nothing prepared):
    /// their completion reports need only be marked tried.
    pub untold: Vec<ToolCallId>,
}

impl Expiry {
    pub fn len(&self) -> usize {
        self.to_follow_up.len() + self.untold.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn extend(&mut self, more: Expiry) {
        self.to_follow_up.extend(more.to_follow_up);
        self.untold.extend(more.untold);
    }
}

const INSERT: &str = include_str!("sql/calls/insert.sql");
const GET: &str = include_str!("sql/calls/get.sql");
const GET_TO_DRIVE: &str = include_str!("sql/calls/get_to_drive.sql");
const MODIFY: &str = include_str!("sql/calls/modify.sql");
const CONFIRM: &str = include_str!("sql/calls/confirm.sql");
const RESUME: &str = include_str!("sql/calls/resume.sql");
const CANCEL: &str = include_str!("sql/calls/cancel.sql");
const PREPARED: &str = include_str!("sql/calls/prepared.sql");
const BEGIN_SIDE_EFFECT: &str = include_str!("sql/calls/begin_side_effect.sql");
const COMPLETE: &str = include_str!("sql/calls/complete.sql");
const FAIL: &str = include_str!("sql/calls/fail.sql");
const RELEASE: &str = include_str!("sql/calls/release.sql");
const EXPIRE: &str = include_str!("sql/calls/expire.sql");
const CLAIM_STRANDED: &str = include_str!("sql/calls/claim_stranded.sql");
const FAIL_EXHAUSTED: &str = include_str!("sql/calls/fail_exhausted.sql");
const CLAIM_OWED_REPORTS: &str = include_str!("sql/calls/claim_owed_reports.sql");
const REPORTED: &str = include_str!("sql/calls/reported.sql");
const CLAIM_OWED_DISCARDS: &str = include_str!("sql/calls/claim_owed_discards.sql");
const DISCARDED: &str = include_str!("sql/calls/discarded.sql");
const OUTCOME_TOLD: &str = include_str!("sql/calls/outcome_told.sql");

/// Every statement above, for the one-row shape check in `rows.rs`.
#[cfg(test)]
pub(crate) const STATEMENTS: &[(&str, &str)] = &[
    ("sql/calls/insert.sql", INSERT),
    ("sql/calls/get.sql", GET),
    ("sql/calls/get_to_drive.sql", GET_TO_DRIVE),
    ("sql/calls/modify.sql", MODIFY),
    ("sql/calls/confirm.sql", CONFIRM),
    ("sql/calls/resume.sql", RESUME),
    ("sql/calls/cancel.sql", CANCEL),
    ("sql/calls/prepared.sql", PREPARED),
    ("sql/calls/begin_side_effect.sql", BEGIN_SIDE_EFFECT),
    ("sql/calls/complete.sql", COMPLETE),
    ("sql/calls/fail.sql", FAIL),
    ("sql/calls/release.sql", RELEASE),
    ("sql/calls/expire.sql", EXPIRE),
    ("sql/calls/claim_stranded.sql", CLAIM_STRANDED),
    ("sql/calls/fail_exhausted.sql", FAIL_EXHAUSTED),
    ("sql/calls/claim_owed_reports.sql", CLAIM_OWED_REPORTS),
    ("sql/calls/reported.sql", REPORTED),
    ("sql/calls/claim_owed_discards.sql", CLAIM_OWED_DISCARDS),
    ("sql/calls/discarded.sql", DISCARDED),
    ("sql/calls/outcome_told.sql", OUTCOME_TOLD),
];

fn json(value: &impl Serialize) -> Result<ParameterValue, StoreError> {
    serde_json::to_vec(value)
        .map(ParameterValue::Jsonb)
        .map_err(|e| StoreError::Unexpected(format!("encoding a parameter: {e}")))
}

fn transition(db: &Connection, sql: &str, params: &[ParameterValue]) -> Result<Transition, StoreError> {
    let row = one_row(db, sql, params)?;
    let before: Option<ToolCall> = row.first().map(decode).transpose()?.flatten();
    let after: Option<ToolCall> = row.get(1).map(decode).transpose()?.flatten();
    Ok(match (before, after) {
        (Some(before), Some(after)) => Transition::Applied { before: Box::new(before), after: Box::new(after) },
        (Some(current), None) => Transition::Rejected { current: Box::new(current) },
        (None, _) => Transition::NotFound,
    })
}

fn id(id: &ToolCallId) -> ParameterValue {
    text(id.as_str())
}

pub fn insert_call<T: DeserializeOwned>(db: &Connection, call: &NewCall<'_>) -> Result<Insertion<T>, StoreError> {
    let row = one_row(
        db,
        INSERT,
        &[
            id(call.tool_call_id),
            text(call.session_id.as_str()),
            optional_text(call.connection_id),
            optional_text(call.intent_id),
            text(call.function_name),
            text(call.component),
            json(call.parameters)?,
            text(call.summary),
            optional_text(call.callback_url),
            optional_text(call.idempotency_key),
            text(call.request_fingerprint),
            text(call.trace_id),
            ParameterValue::Floating64(call.ttl_seconds),
            ParameterValue::Boolean(call.needs_checkpoint),
        ]
        .into_iter()
        .chain(history_parameters(call.validation.as_ref()))
        .chain([
            ParameterValue::Int64(call.max_pending_per_session),
            text(&call.grant.tenant),
            text(call.grant.key_name()),
        ])
        .collect::<Vec<_>>(),
    )?;
    #[derive(Deserialize)]
    struct Existing<T> {
        fingerprint: Option<String>,
        response: T,
    }
    if let Some(created) = row.first().map(decode::<T>).transpose()?.flatten() {
        return Ok(Insertion::New(created));
    }
    match row.get(1).map(decode::<Existing<T>>).transpose()?.flatten() {
        Some(existing) => Ok(Insertion::Existing {
            fingerprint: existing.fingerprint.unwrap_or_default(),
            response: existing.response,
        }),
        None => match row.get(2).map(decode::<Limit>).transpose()?.flatten() {
            Some(limit) => Ok(Insertion::Limited(limit)),
            None => Ok(Insertion::Raced),
        },
    }
}

/// The call with this id, if `caller` may see it.
pub fn get_call(
    db: &Connection,
    caller: Caller<'_>,
    tool_call_id: &ToolCallId,
) -> Result<Option<ToolCall>, StoreError> {
    optional(db, GET, &[id(tool_call_id), caller.tenant()])
}

/// Marks that the caller was told the outcome of `tenant`'s settled call, once: the answer says
/// whether the mark is this request's (made now, or before with the same `key`). `None` when the
/// tenant has no such call.
pub fn mark_outcome_told<T: DeserializeOwned>(
    db: &Connection,
    tenant: &str,
    tool_call_id: &ToolCallId,
    key: Option<&str>,
) -> Result<Option<T>, StoreError> {
    optional(db, OUTCOME_TOLD, &[id(tool_call_id), text(tenant), crate::rows::optional_text(key)])
}

pub fn get_call_to_drive(db: &Connection, tool_call_id: &ToolCallId) -> Result<Option<CallToDrive>, StoreError> {
    optional(db, GET_TO_DRIVE, &[id(tool_call_id)])
}

/// A correction of a PENDING call's parameters.
#[derive(Debug, Clone)]
pub struct Correction<'a> {
    /// The parameters the patch was applied to: a concurrent correction is not overwritten.
    pub expected: &'a Map<String, Value>,
    pub parameters: &'a Map<String, Value>,
    pub summary: &'a str,
    pub reason: Option<&'a str>,
    pub changes: &'a [ParameterChange],
}

pub fn modify_call(
    db: &Connection,
    caller: Caller<'_>,
    tool_call_id: &ToolCallId,
    correction: &Correction<'_>,
) -> Result<Transition, StoreError> {
    transition(
        db,
        MODIFY,
        &[
            id(tool_call_id),
            json(correction.expected)?,
            json(correction.parameters)?,
            text(correction.summary),
            optional_text(correction.reason),
            json(&correction.changes)?,
            caller.tenant(),
            caller.key(),
        ],
    )
}

pub fn confirm_call(
    db: &Connection,
    caller: Caller<'_>,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    lease_seconds: f64,
    callback_url: Option<&str>,
) -> Result<Transition, StoreError> {
    transition(
        db,
        CONFIRM,
        &[
            id(tool_call_id),
            text(lease_owner),
            ParameterValue::Floating64(lease_seconds),
            optional_text(callback_url),
            caller.tenant(),
            caller.key(),
        ],
    )
}

pub fn resume_call(
    db: &Connection,
    caller: Caller<'_>,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    lease_seconds: f64,
) -> Result<Transition, StoreError> {
    transition(
        db,
        RESUME,
        &[
            id(tool_call_id),
            text(lease_owner),
            ParameterValue::Floating64(lease_seconds),
            caller.tenant(),
            caller.key(),
        ],
    )
}

pub fn cancel_call(
    db: &Connection,
    caller: Caller<'_>,
    tool_call_id: &ToolCallId,
    reason: Option<&str>,
    actor: &str,
    voice_response: &str,
) -> Result<Transition, StoreError> {
    transition(
        db,
        CANCEL,
        &[id(tool_call_id), optional_text(reason), text(actor), text(voice_response), caller.tenant(), caller.key()],
    )
}

pub fn mark_prepared(
    db: &Connection,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    checkpoint: &Checkpoint,
    checkpoint_ttl_seconds: f64,
) -> Result<Transition, StoreError> {
    transition(
        db,
        PREPARED,
        &[id(tool_call_id), text(lease_owner), json(checkpoint)?, ParameterValue::Floating64(checkpoint_ttl_seconds)],
    )
}

pub fn begin_side_effect(
    db: &Connection,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    lease_seconds: f64,
) -> Result<Transition, StoreError> {
    transition(db, BEGIN_SIDE_EFFECT, &[id(tool_call_id), text(lease_owner), ParameterValue::Floating64(lease_seconds)])
}

pub fn complete_call(
    db: &Connection,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    result: &Value,
    voice_response: &str,
) -> Result<Transition, StoreError> {
    transition(db, COMPLETE, &[id(tool_call_id), text(lease_owner), json(result)?, text(voice_response)])
}

/// EXECUTING -> FAILED. With `releases_hold` (the tool said no to `execute`, or never got that
/// far), what `prepare` left is owed a `discard` from now on, as a cancel's is: a definite
/// failure must not keep the caller's hold (docs/architecture.md, "The sweeper").
pub fn fail_call(
    db: &Connection,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    reason: &str,
    voice_response: &str,
    releases_hold: bool,
) -> Result<Transition, StoreError> {
    let params = [
        id(tool_call_id),
        text(lease_owner),
        text(reason),
        text(voice_response),
        ParameterValue::Boolean(releases_hold),
    ];
    transition(db, FAIL, &params)
}

/// How a crashed attempt is retried: the first back-off, doubled with each attempt, and how
/// many attempts a call gets in all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retry {
    pub backoff_seconds: f64,
    pub max_attempts: i32,
}

/// Gives up the lease after a crash, so the sweeper re-drives the call once `retry`'s back-off
/// for the attempt has passed.
pub fn release_lease(
    db: &Connection,
    tool_call_id: &ToolCallId,
    lease_owner: &str,
    problem: &str,
    retry: Retry,
) -> Result<Transition, StoreError> {
    transition(
        db,
        RELEASE,
        &[
            id(tool_call_id),
            text(lease_owner),
            text(problem),
            ParameterValue::Floating64(retry.backoff_seconds),
            ParameterValue::Int32(retry.max_attempts),
        ],
    )
}

fn list<T: DeserializeOwned>(db: &Connection, sql: &str, params: &[ParameterValue]) -> Result<Vec<T>, StoreError> {
    let row = one_row(db, sql, params)?;
    Ok(row.first().map(decode::<Vec<T>>).transpose()?.flatten().unwrap_or_default())
}

/// Expires up to `batch` waiting calls past their deadline. `default_callback_url` is where
/// reports go for a call without a callback URL of its own (`None`: nowhere).
pub fn expire_stale_calls(
    db: &Connection,
    batch: i64,
    default_callback_url: Option<&str>,
) -> Result<Expiry, StoreError> {
    let params = [ParameterValue::Int64(batch), optional_text(default_callback_url)];
    Ok(optional(db, EXPIRE, &params)?.unwrap_or_default())
}

pub fn claim_stranded_calls(
    db: &Connection,
    lease_seconds: f64,
    max_attempts: i32,
    batch: i64,
) -> Result<Vec<Claim>, StoreError> {
    list(
        db,
        CLAIM_STRANDED,
        &[ParameterValue::Floating64(lease_seconds), ParameterValue::Int32(max_attempts), ParameterValue::Int64(batch)],
    )
}

/// Calls whose checkpoint or completion report has been owed for longer than `grace_seconds`
/// (the worker that owed it is gone), each claimed for another `grace_seconds`.
pub fn claim_owed_reports(db: &Connection, grace_seconds: f64, batch: i64) -> Result<Vec<ToolCall>, StoreError> {
    list(db, CLAIM_OWED_REPORTS, &[ParameterValue::Floating64(grace_seconds), ParameterValue::Int64(batch)])
}

/// The report of each call's current status has been tried, or had nowhere to go; the sweeper
/// need not send it. One statement for any number of calls.
pub fn reports_tried(db: &Connection, tool_call_ids: &[ToolCallId], kind: &str) -> Result<(), StoreError> {
    let ids: Vec<&str> = tool_call_ids.iter().map(|id| id.as_str()).collect();
    one_row(db, REPORTED, &[json(&ids)?, text(kind)]).map(|_| ())
}

/// Calls whose `discard` has been owed for longer than `grace_seconds` (whoever owed it failed
/// or is gone), with fewer than `max_attempts` tries, each claimed for another `grace_seconds`.
pub fn claim_owed_discards(
    db: &Connection,
    grace_seconds: f64,
    max_attempts: i32,
    batch: i64,
) -> Result<Vec<ToolCall>, StoreError> {
    list(
        db,
        CLAIM_OWED_DISCARDS,
        &[ParameterValue::Floating64(grace_seconds), ParameterValue::Int32(max_attempts), ParameterValue::Int64(batch)],
    )
}

/// The tool answered the call's `discard`: it is no longer owed.
pub fn discard_settled(db: &Connection, tool_call_id: &ToolCallId) -> Result<(), StoreError> {
    one_row(db, DISCARDED, &[id(tool_call_id)]).map(|_| ())
}

pub fn fail_exhausted_calls(db: &Connection, max_attempts: i32, batch: i64) -> Result<Vec<ToolCall>, StoreError> {
    list(db, FAIL_EXHAUSTED, &[ParameterValue::Int32(max_attempts), ParameterValue::Int64(batch)])
}
