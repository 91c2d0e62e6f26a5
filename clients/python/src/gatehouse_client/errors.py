"""Gatehouse's error answers as typed exceptions, one class per code of the OpenAPI `ErrorCode` enum."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Type


class GatehouseError(Exception):
    """An error answer. ``message`` is the sentence the agent can speak, ``code`` the stable code to
    branch on, ``status`` the HTTP status, ``fields`` the culprits of a refused input
    (``[{"field": ..., "problem": ...}]``), ``call_status`` the call's status for 409 and 410."""

    def __init__(
        self,
        *,
        code: str,
        status: int,
        message: str,
        fields: Optional[List[Dict[str, str]]] = None,
        call_status: Optional[str] = None,
        tool_call_id: Optional[str] = None,
        retry_after: Optional[int] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.message = message
        self.fields: List[Dict[str, str]] = fields or []
        self.call_status = call_status
        self.tool_call_id = tool_call_id
        self.retry_after = retry_after
        self.body = body

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status}, message={self.message!r})"


class UnauthorizedError(GatehouseError): ...
class ForbiddenError(GatehouseError): ...
class NotFoundError(GatehouseError): ...
class MethodNotAllowedError(GatehouseError): ...
class InvalidStateError(GatehouseError):
    """409 ``invalid_state``: the call is not in a state that allows this; ``call_status`` says which."""
class ExpiredError(GatehouseError):
    """410 ``expired``: the call timed out before anyone acted on it."""
class InvalidInputError(GatehouseError): ...
class ValidationFailedError(GatehouseError):
    """422 ``validation_failed``: the tool refused the parameters; ``fields`` says why."""
class PayloadTooLargeError(GatehouseError): ...
class UnsupportedMediaTypeError(GatehouseError): ...
class DatabaseUnavailableError(GatehouseError):
    """503 ``database_unavailable``: nothing was written; the client retries after ``Retry-After``."""
class InternalError(GatehouseError): ...
class UnknownFunctionError(GatehouseError): ...
class IdempotencyKeyReusedError(GatehouseError): ...
class CallbackNotAllowedError(GatehouseError): ...
class SideEffectStartedError(GatehouseError):
    """409 ``side_effect_started``: too late to cancel; the irreversible step has begun."""
class ToolUnavailableError(GatehouseError):
    """502 ``tool_unavailable``: the tool crashed or did not answer in time."""
class DeadlineExceededError(GatehouseError):
    """503 ``deadline_exceeded``: the host stopped a request that outlived its deadline. A request
    that changes a call may or may not have been carried out: read the call's status first."""
class CallbackUrlConflictError(GatehouseError):
    """409 ``callback_url_conflict``: a confirm named a callback URL other than the one the call was
    created with (a call's reports go where its creator said). Nothing changed: ``call_status`` is
    PENDING. Never retried, since a repeat gets the same answer: confirm without ``callback_url``,
    or with the call's own."""
class TooManyOpenCallsError(GatehouseError):
    """429 ``too_many_open_calls``: the session already holds ``max_pending_calls_per_session``
    (default 50) waiting PENDING calls, so no call was recorded. Never retried: waiting alone does
    not help (its ``retry_after`` of 1, as on every 429, only paces a retry). Confirm or cancel some
    of the session's calls first."""
class RateLimitedError(GatehouseError):
    """429 ``rate_limited``: the tenant created as many calls in the last second as it may, so no
    call was recorded. ``retry_after`` (1) says when to try again; the client does not retry it
    itself, so that a relay decides whether the moment has passed."""
class SignatureMissingError(GatehouseError):
    """401 ``signature_missing``: a signed request between Gatehouse's hosts (the tool contract, the executor
    hand-off) carried no signature, or not one of the recipe's shape. A relay's own requests never get it (docs/tools.md, "Signatures")."""
class SignatureStaleError(GatehouseError):
    """401 ``signature_stale``: a signed request between Gatehouse's hosts (the tool contract, the executor
    hand-off) carried a signature whose timestamp is outside the receiver's window (a stale request, or the two clocks disagree). A relay's own requests never get it (docs/tools.md, "Signatures")."""
class SignatureMismatchError(GatehouseError):
    """401 ``signature_mismatch``: a signed request between Gatehouse's hosts (the tool contract, the executor
    hand-off) carried a signature that does not match it (another secret, or a changed request). A relay's own requests never get it (docs/tools.md, "Signatures")."""
class SignatureReplayedError(GatehouseError):
    """401 ``signature_replayed``: a signed request between Gatehouse's hosts (the tool contract, the executor
    hand-off) carried a signature whose nonce was already spent (a replay). A relay's own requests never get it (docs/tools.md, "Signatures")."""
class RequestTimeoutError(GatehouseError):
    """408 ``request_timeout``: the request's body did not arrive within the runner's
    ``--body-read-timeout`` (30 s by default). The runner answers it before any component runs, so
    nothing was done. The client sends the request again itself only where that is safe whatever
    happened (reads, the sweep, a create with its Idempotency-Key); for the others it is raised."""


ERROR_CLASSES: Dict[str, Type[GatehouseError]] = {
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "invalid_state": InvalidStateError,
    "expired": ExpiredError,
    "invalid_input": InvalidInputError,
    "validation_failed": ValidationFailedError,
    "payload_too_large": PayloadTooLargeError,
    "unsupported_media_type": UnsupportedMediaTypeError,
    "database_unavailable": DatabaseUnavailableError,
    "internal": InternalError,
    "unknown_function": UnknownFunctionError,
    "idempotency_key_reused": IdempotencyKeyReusedError,
    "callback_not_allowed": CallbackNotAllowedError,
    "side_effect_started": SideEffectStartedError,
    "tool_unavailable": ToolUnavailableError,
    "deadline_exceeded": DeadlineExceededError,
    "callback_url_conflict": CallbackUrlConflictError,
    "too_many_open_calls": TooManyOpenCallsError,
    "request_timeout": RequestTimeoutError,
    "rate_limited": RateLimitedError,
    "signature_missing": SignatureMissingError,
    "signature_stale": SignatureStaleError,
    "signature_mismatch": SignatureMismatchError,
    "signature_replayed": SignatureReplayedError,
}

ERROR_CODES = tuple(ERROR_CLASSES)

# The code of an answer without a JSON error body (a proxy's, the runner's plain-text 413). A bare
# 408 is a proxy's "your request did not arrive in time", as ``request_timeout`` is Gatehouse's; a
# bare 429 is not mapped: from a proxy it is rate limiting, not a full session.
_CODE_BY_STATUS = {
    400: "invalid_input", 401: "unauthorized", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 408: "request_timeout", 409: "invalid_state", 410: "expired", 413: "payload_too_large",
    415: "unsupported_media_type", 422: "validation_failed", 500: "internal",
    502: "tool_unavailable", 503: "database_unavailable",
}


def error_from_answer(status: int, text: str, retry_after: Optional[int] = None) -> GatehouseError:
    """The exception for an error answer."""
    body: Optional[Dict[str, Any]] = None
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict) and isinstance(parsed.get("code"), str):
            body = parsed
    except ValueError:
        pass
    code = body["code"] if body else _CODE_BY_STATUS.get(status, "http_error")
    cls = ERROR_CLASSES.get(code, GatehouseError)
    return cls(
        code=code,
        status=status,
        message=(body or {}).get("error") or text.strip() or f"Gatehouse answered HTTP {status}.",
        fields=(body or {}).get("fields"),
        call_status=(body or {}).get("status"),
        tool_call_id=(body or {}).get("tool_call_id"),
        retry_after=retry_after,
        body=body,
    )


class GatehouseConnectionError(Exception):
    """No answer came. ``maybe_sent`` is False when the connection failed before the request left
    (safe to send again), True when it may have reached Gatehouse: look at the call's status
    before acting again. The client retries such a request only when it is idempotent."""

    def __init__(self, message: str, maybe_sent: bool) -> None:
        super().__init__(message)
        self.maybe_sent = maybe_sent
