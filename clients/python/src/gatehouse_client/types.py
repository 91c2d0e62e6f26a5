"""The request and answer shapes of openapi/gatehouse.yaml (components/schemas) as TypedDicts.
tests/test_openapi.py checks their keys against the file."""


import sys
from typing import Any, Dict, List, Optional, Union

if sys.version_info >= (3, 11):
    from typing import Literal, NotRequired, Required, TypedDict
else:  # pragma: no cover
    from typing_extensions import Literal, NotRequired, Required, TypedDict

Status = Literal["PENDING", "EXECUTING", "PREPARED", "COMPLETED", "FAILED", "CANCELLED", "EXPIRED"]
OpenStatus = Literal["PENDING", "EXECUTING", "PREPARED"]
SettledStatus = Literal["COMPLETED", "FAILED", "CANCELLED", "EXPIRED"]
Parameters = Dict[str, Any]


class FieldProblem(TypedDict):
    field: str
    problem: str


class ToolFault(TypedDict):
    """Why a tool could not be used; ``kind`` names the remedy (docs/deploying.md)."""

    kind: Literal[
        "not_allowed", "no_connection", "timed_out", "signature_refused", "error_status", "bad_answer", "misconfigured"
    ]
    explanation: str


class ErrorBody(TypedDict, total=False):
    error: Required[str]
    code: Required[str]
    status: Status
    tool_call_id: str
    fields: List[FieldProblem]
    cause: ToolFault
    required_scope: str
    """On a 403 ``forbidden`` for a key, the scope the key lacks (docs/keys.md)."""


class Health(TypedDict):
    status: str
    database: str


class CreateRequest(TypedDict, total=False):
    session_id: Required[str]
    function_name: Optional[str]
    function: Optional[str]
    parameters: Required[Parameters]
    connection_id: Optional[str]
    intent_id: Optional[str]
    callback_url: Optional[str]


class CreateResponse(TypedDict):
    tool_call_id: str
    status: Literal["PENDING"]
    function_name: str
    parameters: Parameters
    message: str
    actions_available: List[str]
    expires_at: str


class ModifyRequest(TypedDict, total=False):
    parameters: Required[Parameters]
    reason: Optional[str]


class FieldChange(TypedDict):
    field: str
    old: Any
    new: Any


class ModifyResponse(TypedDict):
    tool_call_id: str
    status: Literal["PENDING"]
    updated_parameters: Parameters
    message: str
    modification_applied: Optional[FieldChange]
    modifications_applied: NotRequired[List[FieldChange]]


class ConfirmRequest(TypedDict, total=False):
    callback_url: Optional[str]


class ResumeRequest(TypedDict, total=False):
    action: Required[Literal["proceed", "cancel"]]
    reason: Optional[str]


class CancelRequest(TypedDict, total=False):
    reason: Optional[str]


class Accepted(TypedDict):
    tool_call_id: str
    status: Literal["EXECUTING"]
    message: str


class CancelResponse(TypedDict):
    tool_call_id: str
    status: Literal["CANCELLED"]
    message: str


# What a call is waiting on or doing now (``current_operation``): ``awaiting_confirmation``
# (PENDING), ``awaiting_resume`` (PREPARED), and while EXECUTING ``prepare`` (a tool with a
# checkpoint preparing its work) or ``execute`` (the irreversible step is next or under way; a
# tool without a checkpoint goes straight to it); None once it is final.
CurrentOperation = Literal["awaiting_confirmation", "awaiting_resume", "prepare", "execute"]


class CallSummary(TypedDict):
    """A call as ``GET /voice-tools/calls`` lists it (the SQL function ``tool_call_summary_json``):
    what it is, where it stands and since when (``status_since``), what it is doing
    (``current_operation``), how many corrections it took, when a failed attempt is tried again
    (``next_retry_at``) and whether it is ``overdue`` (the sweeper is behind), with its
    parameters, without its histories, checkpoint or result (``get_tool_call`` answers those)."""

    tool_call_id: str
    session_id: str
    connection_id: Optional[str]
    intent_id: Optional[str]
    function_name: str
    tool: str
    parameters: Parameters
    status: Status
    status_since: str
    summary: Optional[str]
    voice_response: Optional[str]
    error_message: Optional[str]
    attempts: int
    corrections: int
    current_operation: Optional[CurrentOperation]
    next_retry_at: Optional[str]
    overdue: bool
    expires_at: Optional[str]
    created_at: str
    completed_at: Optional[str]


class ToolCall(TypedDict):
    """A call in full (``get_tool_call``, confirm and resume under ``wait``; the SQL function
    ``tool_call_json``): every field of its ``CallSummary``, and its histories,
    checkpoint and outcome."""

    tool_call_id: str
    session_id: str
    tenant: str
    connection_id: Optional[str]
    intent_id: Optional[str]
    function_name: str
    tool: str
    parameters: Parameters
    parameters_history: List[Dict[str, Any]]
    status: Status
    status_history: List[Dict[str, Any]]
    status_since: str
    summary: Optional[str]
    checkpoint: Optional[Dict[str, Any]]
    result: Any
    error_message: Optional[str]
    voice_response: Optional[str]
    callback_url: Optional[str]
    expires_at: Optional[str]
    attempts: int
    corrections: int
    current_operation: Optional[CurrentOperation]
    next_retry_at: Optional[str]
    overdue: bool
    side_effect_started_at: Optional[str]
    trace_id: Optional[str]
    created_at: str
    confirmed_at: Optional[str]
    prepared_at: Optional[str]
    executed_at: Optional[str]
    completed_at: Optional[str]
    execution_time_ms: Optional[int]


class RecentCall(TypedDict):
    """A settled call in the context view (``get_session_calls``'s ``recent``)."""

    tool_call_id: str
    function_name: str
    parameters: Parameters
    result: Any
    status: SettledStatus
    voice_response: Optional[str]
    created_at: str


class PendingCall(TypedDict):
    """An open call in the context view, with the deadline to act on it (None while EXECUTING)."""

    tool_call_id: str
    function_name: str
    parameters: Parameters
    result: Any
    status: OpenStatus
    voice_response: Optional[str]
    created_at: str
    expires_at: Optional[str]


class ContextResponse(TypedDict):
    session_id: str
    pending: List[PendingCall]
    pending_total: int
    recent: List[RecentCall]
    recent_total: int


class SessionContext(TypedDict):
    context: Any


class SweepReport(TypedDict):
    expired: int
    failed: int
    redriven: int
    reported: int
    discards_retried: int
    session_context_purged: int


class ToolEffects(TypedDict):
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


class AvailableTool(TypedDict):
    """A tool as it describes itself (the contract's ``describe``), and its component."""

    name: str
    aliases: List[str]
    description: str
    parameters_schema: Dict[str, Any]
    needs_checkpoint: bool
    version: str
    effects: NotRequired[ToolEffects]
    component: str
    available: Literal[True]


class UnavailableTool(TypedDict):
    """A registered tool whose component did not answer ``describe``, and why."""

    name: str
    aliases: List[str]
    component: str
    available: Literal[False]
    cause: ToolFault


class ToolList(TypedDict):
    tools: List[Union[AvailableTool, UnavailableTool]]


class ExecutionPage(TypedDict):
    tool: str
    executions: List[Dict[str, Any]]
    next_cursor: Optional[str]


class CallPage(TypedDict):
    calls: List[CallSummary]  # summaries, not whole calls: get_tool_call reads one in full
    next_cursor: Optional[str]


class CallbackAttempt(TypedDict):
    attempt_id: int
    kind: str
    url: str
    attempt: int
    status_code: Optional[int]
    error: Optional[str]
    duration_ms: float
    at: str


class KeyGrant(TypedDict):
    """Who a key is (``GET /voice-tools/key``; docs/keys.md): its tenant, its prefix (``None``
    for the ``api_token`` variable) and its scopes."""

    tenant: str
    key: Optional[str]
    scopes: List[str]


class CallbackAttempts(TypedDict):
    tool_call_id: str
    callbacks: List[CallbackAttempt]


class OutcomeTold(TypedDict):
    """``POST /voice-tools/calls/{id}/outcome-told``: ``first`` says whether the mark is this
    request's, so this relay, and no other, speaks the outcome."""

    tool_call_id: str
    status: str
    first: bool


class ToolStats(TypedDict):
    tool: str
    window: str
    executions: int
    outcomes: Dict[str, int]
    success_rate: Optional[float]
    p50_ms: Optional[float]
    p95_ms: Optional[float]
    by_operation: Dict[str, Dict[str, Any]]
    timeline: List[Dict[str, Any]]
    last_error: Optional[Dict[str, Any]]


class ExecuteGmailRequest(TypedDict, total=False):
    session_id: Required[str]
    intent_id: str
    connection_id: str
    callback_url: Required[str]
    to: Required[Union[str, List[str]]]
    cc: Union[str, List[str]]
    bcc: Union[str, List[str]]
    subject: Required[str]
    body: Required[str]
    reference_context: str


class QueryVectorDbRequest(TypedDict, total=False):
    session_id: Required[str]
    intent_id: str
    connection_id: str
    callback_url: Required[str]
    user_query: Required[str]
    structured_query: Dict[str, Any]


# The direct flows' answers are a union of two shapes (success true or false); kept as dicts.
ExecuteGmailAnswer = Dict[str, Any]
QueryVectorDbAnswer = Dict[str, Any]
JsonRpcAnswer = Dict[str, Any]


class ProgressCallback(TypedDict):
    tool_call_id: str
    tenant: str
    intent_id: Optional[str]
    status: str
    progress: str
    gate: str
    cancellable: bool
    requires_confirmation: NotRequired[bool]
    trace_id: Optional[str]


class CheckpointCallback(TypedDict):
    tool_call_id: str
    tenant: str
    status: Literal["PREPARED"]
    checkpoint: str
    message: str
    resume_webhook: str
    trace_id: Optional[str]


class CompletionCallback(TypedDict):
    tool_call_id: str
    tenant: str
    session_id: str
    status: SettledStatus
    result: Any
    voice_response: Optional[str]
    execution_time_ms: Optional[int]
    context_available: NotRequired[bool]
    context_key: NotRequired[str]
    trace_id: Optional[str]


class RelayAnswer(TypedDict, total=False):
    # `continue` is a keyword in Python: build it as {"continue": True}.
    cancel: bool
    reason: str


# TypedDict name -> the OpenAPI schema it mirrors (checked by tests/test_openapi.py).
SCHEMAS = {
    "CreateRequest": CreateRequest, "CreateResponse": CreateResponse, "ModifyRequest": ModifyRequest,
    "ModifyResponse": ModifyResponse, "ConfirmRequest": ConfirmRequest, "ResumeRequest": ResumeRequest,
    "CancelRequest": CancelRequest, "Accepted": Accepted, "CancelResponse": CancelResponse,
    "ToolCall": ToolCall, "CallSummary": CallSummary, "RecentCall": RecentCall, "PendingCall": PendingCall,
    "ContextResponse": ContextResponse, "SessionContext": SessionContext,
    "SweepReport": SweepReport, "ToolList": ToolList, "ExecutionPage": ExecutionPage,
    "ToolStats": ToolStats, "CallPage": CallPage, "CallbackAttempt": CallbackAttempt,
    "CallbackAttempts": CallbackAttempts, "OutcomeTold": OutcomeTold, "ExecuteGmailRequest": ExecuteGmailRequest,
    "QueryVectorDbRequest": QueryVectorDbRequest, "ProgressCallback": ProgressCallback,
    "CheckpointCallback": CheckpointCallback, "CompletionCallback": CompletionCallback,
    "Health": Health, "Error": ErrorBody, "ToolFault": ToolFault,
    "AvailableTool": AvailableTool, "UnavailableTool": UnavailableTool,
}
