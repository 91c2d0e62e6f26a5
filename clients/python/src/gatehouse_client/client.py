"""The synchronous client: one method per public route (named after its OpenAPI operationId)."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Union, cast

import httpx

from ._core import CONDITIONAL, IDEMPOTENT, ONCE, Answer, Call, Core, new_idempotency_key, quote, raw
from .types import (
    Accepted,
    CancelRequest,
    CancelResponse,
    ConfirmRequest,
    ContextResponse,
    CreateRequest,
    CreateResponse,
    ExecuteGmailAnswer,
    ExecuteGmailRequest,
    CallbackAttempts,
    OutcomeTold,
    KeyGrant,
    CallPage,
    ExecutionPage,
    Health,
    JsonRpcAnswer,
    ModifyRequest,
    ModifyResponse,
    QueryVectorDbAnswer,
    QueryVectorDbRequest,
    ResumeRequest,
    SessionContext,
    SweepReport,
    ToolCall,
    ToolList,
    ToolStats,
)


class Gatehouse:
    """A Gatehouse client. Bearer token on every request (but ``/health``), a generated
    ``Idempotency-Key`` on create, ``Prefer: wait`` through ``wait=``, ``traceparent`` passed
    through, and retries only where they are safe (see ``_core``)."""

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
        http: Optional[httpx.Client] = None,
    ) -> None:
        self._core = Core(
            base_url, token, max_attempts=max_attempts, max_retry_after=max_retry_after,
            retry_backoff=retry_backoff, timeout=timeout, traceparent=traceparent,
        )
        self._http = http or httpx.Client()
        self._owns_http = http is None

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "Gatehouse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def get_health(self, *, traceparent: Optional[str] = None) -> Health:
        """``GET /health`` (no token). A 503 is an answer here (``status: degraded``), not an error."""
        return cast(Health, self._send(Call("GET", "/health", IDEMPOTENT, traceparent=traceparent, accept=(503,))).body)

    def create_tool_call(
        self, request: CreateRequest, *, idempotency_key: Optional[str] = None, traceparent: Optional[str] = None
    ) -> CreateResponse:
        """``POST /voice-tools/pending``: a PENDING call; speak its ``message``. A key is generated when
        none is given, so a create whose answer was lost is sent again safely. A session full of waiting
        calls is refused with ``TooManyOpenCallsError`` (429, not retried): confirm or cancel some first."""
        headers = {"Idempotency-Key": idempotency_key or new_idempotency_key()}
        call = Call("POST", "/voice-tools/pending", IDEMPOTENT, body=request, headers=headers, traceparent=traceparent)
        return cast(CreateResponse, self._send(call).body)

    def modify_tool_call(self, id: str, request: ModifyRequest, *, traceparent: Optional[str] = None) -> ModifyResponse:
        """``PATCH /voice-tools/modify/{id}``: a JSON merge patch on a PENDING call's parameters."""
        call = Call("PATCH", f"/voice-tools/modify/{quote(id)}", CONDITIONAL, body=request, traceparent=traceparent)
        return cast(ModifyResponse, self._send(call).body)

    def cancel_tool_call(self, id: str, request: Optional[CancelRequest] = None, *, traceparent: Optional[str] = None) -> CancelResponse:
        """``DELETE /voice-tools/cancel/{id}``."""
        call = Call("DELETE", f"/voice-tools/cancel/{quote(id)}", CONDITIONAL, body=request or {}, traceparent=traceparent)
        return cast(CancelResponse, self._send(call).body)

    def confirm_tool_call(
        self, id: str, request: Optional[ConfirmRequest] = None, *, wait: Optional[float] = None, traceparent: Optional[str] = None
    ) -> Union[Accepted, ToolCall]:
        """``POST /voice-tools/confirm/{id}``: ``Accepted`` at once, or with ``wait`` the call in full once
        it leaves EXECUTING (``is_tool_call`` tells which). Sent again only if it never left; a lost
        answer or a 503 is raised for the relay to read the call's status first. A ``callback_url`` other
        than the one the call was created with is refused with ``CallbackUrlConflictError`` (409)."""
        call = Call("POST", f"/voice-tools/confirm/{quote(id)}", ONCE, body=request or {}, wait=wait, traceparent=traceparent)
        return cast(Union[Accepted, ToolCall], self._send(call).body)

    def get_tool_call(self, id: str, *, wait: Optional[float] = None, traceparent: Optional[str] = None) -> ToolCall:
        """``GET /voice-tools/status/{id}``; with ``wait``, a long-poll until the call leaves EXECUTING."""
        call = Call("GET", f"/voice-tools/status/{quote(id)}", IDEMPOTENT, wait=wait, traceparent=traceparent)
        return cast(ToolCall, self._send(call).body)

    def get_session_calls(self, session_id: str, *, traceparent: Optional[str] = None) -> ContextResponse:
        """``GET /voice-tools/context/{session}``: the session's open and recent calls."""
        call = Call("GET", f"/voice-tools/context/{quote(session_id)}", IDEMPOTENT, traceparent=traceparent)
        return cast(ContextResponse, self._send(call).body)

    def get_session_context(self, session_id: str, context_key: str, *, traceparent: Optional[str] = None) -> SessionContext:
        """``GET /get-session-context``: a value a tool stored for the session (404 when absent or expired)."""
        query = {"session_id": session_id, "context_key": context_key}
        call = Call("GET", "/get-session-context", IDEMPOTENT, query=query, traceparent=traceparent)
        return cast(SessionContext, self._send(call).body)

    def resume_execution(
        self, id: str, request: ResumeRequest, *, wait: Optional[float] = None, traceparent: Optional[str] = None
    ) -> Union[Accepted, ToolCall, CancelResponse]:
        """``POST /resume-execution/{id}``: ``proceed`` (``Accepted``, or with ``wait`` the settled call) or
        ``cancel`` (``CancelResponse``). Sent again only if it never left, like confirm."""
        call = Call("POST", f"/resume-execution/{quote(id)}", ONCE, body=request, wait=wait, traceparent=traceparent)
        return cast(Union[Accepted, ToolCall, CancelResponse], self._send(call).body)

    def sweep(self, *, traceparent: Optional[str] = None) -> SweepReport:
        """``POST /voice-tools/sweep``."""
        return cast(SweepReport, self._send(Call("POST", "/voice-tools/sweep", IDEMPOTENT, body={}, traceparent=traceparent)).body)

    def list_tools(self, *, traceparent: Optional[str] = None) -> ToolList:
        """``GET /voice-tools/tools``."""
        return cast(ToolList, self._send(Call("GET", "/voice-tools/tools", IDEMPOTENT, traceparent=traceparent)).body)

    def list_tool_executions(
        self,
        name: str,
        *,
        limit: Optional[int] = None,
        outcome: Optional[str] = None,
        since: Optional[str] = None,
        cursor: Optional[str] = None,
        traceparent: Optional[str] = None,
    ) -> ExecutionPage:
        """``GET /voice-tools/tools/{name}/executions``: one page, newest first."""
        query = {"limit": limit, "outcome": outcome, "since": since, "cursor": cursor}
        call = Call("GET", f"/voice-tools/tools/{quote(name)}/executions", IDEMPOTENT, query=query, traceparent=traceparent)
        return cast(ExecutionPage, self._send(call).body)

    def list_tool_calls(
        self,
        *,
        session_id: Optional[str] = None,
        function_name: Optional[str] = None,
        status: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        traceparent: Optional[str] = None,
    ) -> CallPage:
        """``GET /voice-tools/calls``: one page of every session's calls, newest first, filtered, each as
        a ``CallSummary`` (no parameters, histories or result: ``get_tool_call`` reads a call in full)."""
        query = {"session_id": session_id, "function_name": function_name, "status": status, "limit": limit, "cursor": cursor}
        call = Call("GET", "/voice-tools/calls", IDEMPOTENT, query=query, traceparent=traceparent)
        return cast(CallPage, self._send(call).body)

    def mark_outcome_told(
        self, id: str, *, idempotency_key: Optional[str] = None, traceparent: Optional[str] = None
    ) -> OutcomeTold:
        """``POST /voice-tools/calls/{id}/outcome-told``: marks, once per call, that the caller was told
        the settled call's outcome; speak it only when the answer's ``first`` is true. A key is
        generated when none is given, so a mark whose answer was lost is sent again and still
        learns that it is this request's."""
        headers = {"Idempotency-Key": idempotency_key or new_idempotency_key()}
        call = Call("POST", f"/voice-tools/calls/{quote(id)}/outcome-told", IDEMPOTENT, headers=headers, traceparent=traceparent)
        return cast(OutcomeTold, (self._send(call)).body)

    def list_callback_attempts(self, id: str, *, traceparent: Optional[str] = None) -> CallbackAttempts:
        """``GET /voice-tools/calls/{id}/callbacks``: every attempt to deliver the call's callbacks."""
        call = Call("GET", f"/voice-tools/calls/{quote(id)}/callbacks", IDEMPOTENT, traceparent=traceparent)
        return cast(CallbackAttempts, self._send(call).body)

    def get_key(self, *, traceparent: Optional[str] = None) -> KeyGrant:
        """``GET /voice-tools/key``: who this client's key is (its tenant, prefix and scopes)."""
        call = Call("GET", "/voice-tools/key", IDEMPOTENT, traceparent=traceparent)
        return cast(KeyGrant, (self._send(call)).body)

    def tool_stats(self, name: str, *, window: Optional[str] = None, traceparent: Optional[str] = None) -> ToolStats:
        """``GET /voice-tools/tools/{name}/stats``."""
        call = Call("GET", f"/voice-tools/tools/{quote(name)}/stats", IDEMPOTENT, query={"window": window}, traceparent=traceparent)
        return cast(ToolStats, self._send(call).body)

    def query_vector_db(
        self, request: QueryVectorDbRequest, *, timeout: Optional[float] = None, traceparent: Optional[str] = None
    ) -> QueryVectorDbAnswer:
        """``POST /query-vector-db``: the gated direct flow; answers once it has stopped."""
        call = Call("POST", "/query-vector-db", ONCE, body=request, timeout=timeout, traceparent=traceparent)
        return cast(QueryVectorDbAnswer, self._send(call).body)

    def execute_gmail(
        self, request: ExecuteGmailRequest, *, timeout: Optional[float] = None, traceparent: Optional[str] = None
    ) -> ExecuteGmailAnswer:
        """``POST /execute-gmail``: the gated direct flow; answers once it has stopped."""
        call = Call("POST", "/execute-gmail", ONCE, body=request, timeout=timeout, traceparent=traceparent)
        return cast(ExecuteGmailAnswer, self._send(call).body)

    def mcp(
        self, message: Dict[str, Any], *, protocol_version: Optional[str] = None, traceparent: Optional[str] = None
    ) -> Optional[JsonRpcAnswer]:
        """``POST /mcp``: one JSON-RPC message; its JSON-RPC answer, or None for a notification (202)."""
        headers = {"Accept": "application/json, text/event-stream"}
        if protocol_version:
            headers["MCP-Protocol-Version"] = protocol_version
        answer = self._send(Call("POST", "/mcp", ONCE, body=message, headers=headers, traceparent=traceparent, accept=(400,)))
        return None if answer.status == 202 else cast(JsonRpcAnswer, answer.body)

    def request(
        self,
        method: str,
        path: str,
        *,
        content: Union[str, bytes, None] = None,
        headers: Optional[Dict[str, str]] = None,
        traceparent: Optional[str] = None,
    ) -> Answer:
        """One request with the client's token, trace and retry rules, for anything the methods
        above do not cover (and tests): a 2xx is returned, an error answer raised."""
        body = raw(content) if content is not None else None
        return self._send(Call(method, path, ONCE, body=body, headers=dict(headers or {}), traceparent=traceparent))

    def _send(self, call: Call) -> Answer:
        request, timeout = self._core.build(call)
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._http.request(**request, timeout=timeout)
            except httpx.TransportError as error:
                delay = self._core.on_transport_error(call, error, attempt)
                time.sleep(delay or 0)
                continue
            outcome = self._core.on_response(call, response, attempt)
            if isinstance(outcome, Answer):
                return outcome
            time.sleep(outcome)
