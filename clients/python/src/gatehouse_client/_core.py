"""What the sync and async clients share: how a request is built, when it may be retried, and how
an answer becomes a result or an exception."""

from __future__ import annotations

import email.utils
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

import httpx

from .errors import GatehouseConnectionError, error_from_answer

# Each OpenAPI operationId, its method and path, and the client method that serves it
# (tests/test_openapi.py checks this table against the file and both clients).
OPERATIONS: Dict[str, Tuple[str, str, str]] = {
    "getHealth": ("GET", "/health", "get_health"),
    "createToolCall": ("POST", "/voice-tools/pending", "create_tool_call"),
    "modifyToolCall": ("PATCH", "/voice-tools/modify/{id}", "modify_tool_call"),
    "cancelToolCall": ("DELETE", "/voice-tools/cancel/{id}", "cancel_tool_call"),
    "confirmToolCall": ("POST", "/voice-tools/confirm/{id}", "confirm_tool_call"),
    "getToolCall": ("GET", "/voice-tools/status/{id}", "get_tool_call"),
    "getSessionCalls": ("GET", "/voice-tools/context/{session}", "get_session_calls"),
    "getSessionContext": ("GET", "/get-session-context", "get_session_context"),
    "resumeExecution": ("POST", "/resume-execution/{id}", "resume_execution"),
    "sweep": ("POST", "/voice-tools/sweep", "sweep"),
    "listTools": ("GET", "/voice-tools/tools", "list_tools"),
    "listToolExecutions": ("GET", "/voice-tools/tools/{name}/executions", "list_tool_executions"),
    "toolStats": ("GET", "/voice-tools/tools/{name}/stats", "tool_stats"),
    "listToolCalls": ("GET", "/voice-tools/calls", "list_tool_calls"),
    "listCallbackAttempts": ("GET", "/voice-tools/calls/{id}/callbacks", "list_callback_attempts"),
    "markOutcomeTold": ("POST", "/voice-tools/calls/{id}/outcome-told", "mark_outcome_told"),
    "getKey": ("GET", "/voice-tools/key", "get_key"),
    "queryVectorDb": ("POST", "/query-vector-db", "query_vector_db"),
    "executeGmail": ("POST", "/execute-gmail", "execute_gmail"),
    "mcp": ("POST", "/mcp", "mcp"),
}

# When a request may be sent again:
# - IDEMPOTENT (reads, the sweep, and a create, which always carries an Idempotency-Key): after
#   any connection failure, after a 503 database_unavailable, once its Retry-After has passed, and after a
#   408 request_timeout (the body did not arrive in time: the runner answered before any
#   component ran), after the connection backoff, with the same body;
# - CONDITIONAL (modify, cancel): after a connection that failed before the request left, and
#   after a 503 database_unavailable: these answer it only when their first connection failed,
#   before anything was written. A lost answer is not retried (a second modify or cancel would
#   answer differently): GatehouseConnectionError(maybe_sent=True);
# - ONCE (confirm, resume, the direct flows, MCP): only after a connection that failed before the
#   request left. A lost answer raises GatehouseConnectionError(maybe_sent=True) and a 503
#   DatabaseUnavailableError (retry_after): under ``Prefer: wait`` Gatehouse reads the call again
#   on a new connection after its transition has committed, so its 503 does not prove nothing
#   happened. The relay reads the call's status (get_tool_call, which is retried) first.
# A 408 request_timeout on a CONDITIONAL or ONCE request is raised (RequestTimeoutError), not
# retried: only idempotent requests are sent again on it, since a 408 from a proxy in front of
# Gatehouse proves less than the runner's. The runner's means nothing was done, so the relay may
# send the request again itself. (After a proxy's, a repeated modify, cancel, confirm or resume
# that had taken effect is refused with 409 naming the call's state; a direct flow would run
# again, so read the session's calls first.)
# Never retried, whatever the policy: a 503 deadline_exceeded (the request may have been carried
# out; every 503 carries Retry-After, so the code decides, not the header), 429
# too_many_open_calls (waiting alone does not help, the session's calls must be confirmed or
# cancelled first), 409 callback_url_conflict (a
# repeat gets the same answer), and every other 4xx and 5xx.
IDEMPOTENT = "idempotent"
CONDITIONAL = "conditional"
ONCE = "once"

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)


class _Raw:
    def __init__(self, content: Union[str, bytes]) -> None:
        self.content = content


@dataclass
class Call:
    method: str
    path: str
    retry: str
    body: Any = None
    query: Dict[str, Any] = field(default_factory=dict)
    headers: Dict[str, str] = field(default_factory=dict)
    wait: Optional[float] = None
    traceparent: Optional[str] = None
    timeout: Optional[float] = None
    accept: Tuple[int, ...] = ()


@dataclass
class Answer:
    status: int
    headers: httpx.Headers
    body: Any


def new_idempotency_key() -> str:
    return f"gh-{uuid.uuid4()}"


def quote(segment: str) -> str:
    from urllib.parse import quote as q

    return q(segment, safe="")


class Core:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        max_attempts: int = 3,
        max_retry_after: float = 30,
        retry_backoff: float = 0.2,
        timeout: float = 30,
        traceparent: Optional[Callable[[], Optional[str]]] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        self.max_attempts = max(1, max_attempts)
        self.max_retry_after = max_retry_after
        self.retry_backoff = retry_backoff
        self.timeout = timeout
        self._traceparent = traceparent

    def build(self, call: Call) -> Tuple[Dict[str, Any], float]:
        headers = {"Accept": "application/json", **call.headers}
        if call.path != "/health":
            headers["Authorization"] = f"Bearer {self._token}"
        traceparent = call.traceparent or (self._traceparent() if self._traceparent else None)
        if traceparent:
            headers["traceparent"] = traceparent
        if call.wait is not None:
            headers["Prefer"] = f"wait={call.wait:g}"
        content: Optional[Union[str, bytes]] = None
        if isinstance(call.body, _Raw):
            content = call.body.content
        elif call.body is not None:
            content = json.dumps(call.body)
            headers.setdefault("Content-Type", "application/json")
        query = {k: v for k, v in call.query.items() if v is not None}
        timeout = (call.timeout or self.timeout) + (call.wait or 0)
        request = dict(method=call.method, url=self.base_url + call.path, params=query, headers=headers, content=content)
        return request, timeout

    def on_transport_error(self, call: Call, error: httpx.TransportError, attempt: int) -> Optional[float]:
        """Seconds to wait before the next attempt, or raises."""
        not_sent = isinstance(error, _NOT_SENT)
        if attempt < self.max_attempts and (not_sent or call.retry == IDEMPOTENT):
            return float(self.retry_backoff * 2 ** (attempt - 1))
        where = "the request was not sent" if not_sent else "it may have reached Gatehouse"
        raise GatehouseConnectionError(
            f"{call.method} {call.path}: no answer from Gatehouse ({type(error).__name__}: {error}); {where}",
            maybe_sent=not not_sent,
        ) from error

    def on_response(self, call: Call, response: httpx.Response, attempt: int) -> Union[Answer, float]:
        """The answer, or seconds to wait before the next attempt; raises an error answer."""
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        retryable = response.status_code == 503 and error_code(response) == "database_unavailable"
        if retryable and retry_after is not None and call.retry != ONCE and 503 not in call.accept:
            if attempt < self.max_attempts and retry_after <= self.max_retry_after:
                return float(retry_after)
        # 408 request_timeout: nothing was done, but only an idempotent request is sent again on it
        # (see above); 429 and 409 are never retried.
        if response.status_code == 408 and call.retry == IDEMPOTENT and attempt < self.max_attempts:
            return float(self.retry_backoff * 2 ** (attempt - 1))
        if response.is_success or response.status_code in call.accept:
            text = response.text
            return Answer(response.status_code, response.headers, json.loads(text) if text else None)
        raise error_from_answer(response.status_code, response.text, retry_after)


def error_code(response: httpx.Response) -> Optional[str]:
    """An error answer's ``code``; None when the body is not the API's error shape."""
    try:
        body = response.json()
    except ValueError:
        return None
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else None


def parse_retry_after(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, int(when.timestamp() - time.time() + 0.999))


def is_tool_call(answer: Mapping[str, Any]) -> bool:
    """Whether a confirm or resume answer is the call in full (``Prefer: wait``) rather than ``Accepted``."""
    return "session_id" in answer


def raw(content: Union[str, bytes]) -> _Raw:
    return _Raw(content)
