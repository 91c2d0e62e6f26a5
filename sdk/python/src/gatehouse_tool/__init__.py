"""Write a Gatehouse tool in Python (docs/tools.md, "A tool in any language"): subclass
:class:`Tool`, and serve it from an existing web service with :func:`contract_app` (ASGI:
FastAPI, Starlette) or as a Spin component. The package keeps the tool contract
(openapi/tool-contract.yaml) around your logic: the signature and its replay window, the ordering
rules, ``execute`` at most once per call, and the answers' shapes."""

from .asgi import ContractApp, contract_app
from .contract import (
    OPERATIONS,
    REPLAY_WINDOW_SECONDS,
    SIGNATURE_HEADER,
    Checkpoint,
    Executed,
    FieldProblem,
    ToolDescription,
    ToolEffects,
    ToolRequest,
)
from .ledger import CallStore, MemoryStore, SqliteStore
from .server import ContractServer, Reply
from .signature import Refusal, Signed, check, sign, verify
from .tool import Call, InvalidParameters, Tool, ToolFailure, checkpoint, executed

__all__ = [
    "OPERATIONS",
    "REPLAY_WINDOW_SECONDS",
    "SIGNATURE_HEADER",
    "Call",
    "CallStore",
    "Checkpoint",
    "ContractApp",
    "ContractServer",
    "Executed",
    "FieldProblem",
    "InvalidParameters",
    "MemoryStore",
    "Refusal",
    "Reply",
    "Signed",
    "SqliteStore",
    "Tool",
    "ToolDescription",
    "ToolEffects",
    "ToolFailure",
    "ToolRequest",
    "check",
    "checkpoint",
    "contract_app",
    "executed",
    "sign",
    "verify",
]
