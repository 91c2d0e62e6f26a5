"""A typed client for Gatehouse, sync (``Gatehouse``) and async (``AsyncGatehouse``), with callback
signature checking (``verify_callback``) and callback receivers for ``http.server`` and ASGI."""

from ._core import OPERATIONS, Answer, is_tool_call
from .aio import AsyncGatehouse
from .client import Gatehouse
from .errors import (
    ERROR_CLASSES,
    ERROR_CODES,
    CallbackNotAllowedError,
    CallbackUrlConflictError,
    DatabaseUnavailableError,
    DeadlineExceededError,
    ExpiredError,
    ForbiddenError,
    GatehouseConnectionError,
    GatehouseError,
    IdempotencyKeyReusedError,
    InternalError,
    InvalidInputError,
    InvalidStateError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    RequestTimeoutError,
    SideEffectStartedError,
    SignatureMismatchError,
    SignatureMissingError,
    SignatureReplayedError,
    SignatureStaleError,
    TooManyOpenCallsError,
    ToolUnavailableError,
    UnauthorizedError,
    UnknownFunctionError,
    UnsupportedMediaTypeError,
    ValidationFailedError,
    error_from_answer,
)
from .receiver import Callback, callback_asgi_app, make_callback_handler
from .signature import CALLBACK_KIND_HEADER, SIGNATURE_HEADER, TENANT_HEADER, SpentNonces, sign_callback, verify_callback

__all__ = [
    "OPERATIONS", "Answer", "is_tool_call", "AsyncGatehouse", "Gatehouse", "ERROR_CLASSES", "ERROR_CODES",
    "CallbackNotAllowedError", "CallbackUrlConflictError", "DatabaseUnavailableError", "DeadlineExceededError", "ExpiredError", "ForbiddenError",
    "GatehouseConnectionError", "GatehouseError", "IdempotencyKeyReusedError", "InternalError",
    "InvalidInputError", "InvalidStateError", "MethodNotAllowedError", "NotFoundError",
    "PayloadTooLargeError", "RateLimitedError", "RequestTimeoutError", "SideEffectStartedError",
    "SignatureMismatchError", "SignatureMissingError", "SignatureReplayedError", "SignatureStaleError", "TooManyOpenCallsError",
    "ToolUnavailableError", "UnauthorizedError",
    "UnknownFunctionError", "UnsupportedMediaTypeError", "ValidationFailedError", "error_from_answer",
    "Callback", "callback_asgi_app", "make_callback_handler", "CALLBACK_KIND_HEADER", "SIGNATURE_HEADER",
    "sign_callback", "verify_callback", "SpentNonces", "TENANT_HEADER",
]
__version__ = "0.1.0"
