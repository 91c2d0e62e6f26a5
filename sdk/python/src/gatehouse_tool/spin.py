"""The contract as a Spin component built with componentize-py (docs/tools.md, "A tool in any
language"): ``IncomingHandler = incoming_handler(tool)`` in the app module is the whole entry
point. It reads the ``contract_secret`` and ``db_url`` variables, keeps its calls in Gatehouse's
database (:class:`PostgresStore`) and serves the contract on the chained route and on
``/internal/tools/<component>/...``, like the tools built on ``crates/tool``.

Only importable inside a component: ``wit_world`` is the bindings componentize-py generates for
``gatehouse_tool/wit/tool.wit`` (``python -m gatehouse_tool.componentize`` builds)."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Optional, Union
from urllib.parse import urlsplit

import poll_loop
from componentize_py_types import Err, Ok
from wit_world import exports
from wit_world.imports import postgres, variables
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    IncomingResponse,
    Method_Connect,
    Method_Delete,
    Method_Get,
    Method_Head,
    Method_Options,
    Method_Other,
    Method_Patch,
    Method_Post,
    Method_Put,
    Method_Trace,
    OutgoingRequest,
    OutgoingResponse,
    ResponseOutparam,
    Scheme_Http,
    Scheme_Https,
    Scheme_Other,
)

from .ledger import Record
from .server import MAX_BODY_BYTES, ContractServer, Reply, error, too_large
from .tool import Tool

log = logging.getLogger("gatehouse_tool")

CHAINED_ROUTE = "/..."
"""The route Spin reports for a request that reached a private component by service chaining."""

_METHODS = {
    Method_Get: "GET", Method_Head: "HEAD", Method_Post: "POST", Method_Put: "PUT", Method_Delete: "DELETE",
    Method_Connect: "CONNECT", Method_Options: "OPTIONS", Method_Trace: "TRACE", Method_Patch: "PATCH",
}


def _variable(name: str) -> Optional[str]:
    try:
        return variables.get(name) or None
    except Err:
        return None


def variable(name: str) -> Optional[str]:
    """The component's Spin variable ``name`` (its ``[component.<id>.variables]``), or ``None``
    when it has none or it is empty: ``variable("backend_url")`` is the backend that
    ``gatehouse new tool --backend`` named."""
    return _variable(name)


@dataclass(frozen=True)
class Response:
    """What :func:`fetch` answers: the status, the headers (names in lower case) and the body."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


async def fetch(
    method: str,
    url: str,
    *,
    headers: Optional[dict[str, str]] = None,
    body: Optional[bytes] = None,
    json: Any = None,
) -> Response:
    """Sends one HTTP request from the component (wasi:http's outgoing handler, on the event loop
    the component serves its request on) and reads the whole answer:
    ``await fetch("POST", f"{backend}/orders", json={...})`` in an ``async def`` of the tool.
    The origin must be in the component's ``allowed_outbound_hosts`` (``gatehouse new tool
    --backend`` puts the backend's there); otherwise the host refuses and this raises. A request
    that gets no answer raises too, which Gatehouse treats as a crash and retries."""
    import json as _json

    parts = urlsplit(url)
    fields: list[tuple[str, bytes]] = [(key.lower(), value.encode("latin-1")) for key, value in (headers or {}).items()]
    if json is not None:
        body = _json.dumps(json).encode()
        if not any(key == "content-type" for key, _ in fields):
            fields.append(("content-type", b"application/json"))
    request = OutgoingRequest(Fields.from_list(fields))
    verb = method.upper()
    request.set_method(_outgoing_method(verb))
    scheme = parts.scheme.lower()
    request.set_scheme(Scheme_Https() if scheme == "https" else Scheme_Http() if scheme == "http" else Scheme_Other(scheme))
    request.set_authority(parts.netloc)
    request.set_path_with_query(parts.path + (f"?{parts.query}" if parts.query else "") or "/")
    # The body is taken before the request is handed over, and written while the answer is
    # awaited, so a body larger than the host's buffer does not wait on itself.
    sink = poll_loop.Sink(request.body())
    answer: IncomingResponse = (
        await asyncio.gather(poll_loop.send(request), _send_all(sink, body or b""))
    )[0]
    # The headers are a child of the answer: dropped before its body is taken, as in _serve.
    with answer.headers() as received:
        answer_headers = {key.lower(): value.decode("latin-1") for key, value in received.entries()}
    status = answer.status()
    stream = poll_loop.Stream(answer.consume())
    chunks: list[bytes] = []
    while (chunk := await stream.next()) is not None:
        chunks.append(chunk)
    answer.__exit__(None, None, None)
    return Response(status, answer_headers, b"".join(chunks))


def _outgoing_method(
    verb: str,
) -> Union[
    Method_Get, Method_Head, Method_Post, Method_Put, Method_Delete, Method_Connect, Method_Options, Method_Trace,
    Method_Patch, Method_Other,
]:
    """The WIT method for an HTTP verb (upper-case): one of the named ones, or ``Method_Other``."""
    match verb:
        case "GET":
            return Method_Get()
        case "HEAD":
            return Method_Head()
        case "POST":
            return Method_Post()
        case "PUT":
            return Method_Put()
        case "DELETE":
            return Method_Delete()
        case "CONNECT":
            return Method_Connect()
        case "OPTIONS":
            return Method_Options()
        case "TRACE":
            return Method_Trace()
        case "PATCH":
            return Method_Patch()
        case _:
            return Method_Other(verb)


async def _send_all(sink: Any, body: bytes) -> None:
    if body:
        await sink.send(body)
    sink.close()


class PostgresStore:
    """Calls kept in Gatehouse's database (``tool_sdk_calls``, one row per tool and call; nonces in
    ``service_nonces``, shared with the Rust tools), so every instance and host of the tool agrees.
    The statements call the functions of ``migrations/V16__tool_sdk_calls.sql``, which every SDK
    shares; each returns exactly one row (Spin 4.0's PostgreSQL host never returns from a query
    with none: docs/architecture.md, "No query returns zero rows"). It runs them on ``db``, the
    connection the tool's own statements use too."""

    def __init__(self, tool: str, db: Database) -> None:
        self._tool = tool
        self._db = db

    def _value(self, statement: str, parameters: list[postgres.ParameterValue]) -> postgres.DbValue:
        rows = self._db.connection.query(statement, parameters).rows
        if len(rows) != 1 or len(rows[0]) != 1:
            raise RuntimeError(f"expected one value, got {len(rows)} rows")
        return rows[0][0]

    def load(self, call_id: str) -> tuple[Optional[Record], int]:
        found = self._value(
            "SELECT tool_sdk_call($1, $2)::text",
            [postgres.ParameterValue_Str(self._tool), postgres.ParameterValue_Str(call_id)],
        )
        if not isinstance(found, postgres.DbValue_Str):
            return None, 0
        loaded = json.loads(found.value)
        return loaded["record"], int(loaded["version"])

    def save(self, call_id: str, record: Record, version: int) -> bool:
        saved = self._value(
            "SELECT save_tool_sdk_call($1, $2, ($3::text)::jsonb, $4)",
            [
                postgres.ParameterValue_Str(self._tool),
                postgres.ParameterValue_Str(call_id),
                postgres.ParameterValue_Str(json.dumps(record)),
                postgres.ParameterValue_Int64(version),
            ],
        )
        return isinstance(saved, postgres.DbValue_Boolean) and saved.value

    def spend_nonce(self, nonce: str, expires_at: float) -> bool:
        fresh = self._value(
            "SELECT spend_service_nonce($1, $2)",
            [postgres.ParameterValue_Str(nonce), postgres.ParameterValue_Floating64(float(expires_at))],
        )
        return isinstance(fresh, postgres.DbValue_Boolean) and fresh.value


Value = Union[str, int, float, bool, None]


class Database:
    """The tool's way to its own tables (``migrations/`` of the tool, applied by ``gatehouse
    migrate`` in the schema ``tool_<component id>``: docs/tools.md, "A tool's own tables"), over
    the component's ``db_url``. Parameters and values are plain Python values; an ``int`` is sent
    as a ``bigint`` (write ``$1::integer`` for an ``integer`` column, or use ``bigint`` columns).
    A ``query`` must return at least one row: Spin 4.0's PostgreSQL host never answers one that
    returns none."""

    def __init__(self, address: str) -> None:
        self.connection = postgres.Connection.open(address)

    def execute(self, statement: str, *parameters: Value) -> int:
        """Runs a statement that returns no rows; how many rows it changed."""
        return self.connection.execute(statement, [_parameter(value) for value in parameters])

    def query(self, statement: str, *parameters: Value) -> list[tuple[Value, ...]]:
        """The rows of a query, each a tuple of plain values."""
        rows = self.connection.query(statement, [_parameter(value) for value in parameters]).rows
        return [tuple(_value(cell) for cell in row) for row in rows]


_shared: Optional[Database] = None


def database() -> Database:
    """The component's connection to Gatehouse's database, from the ``db_url`` variable: the same
    one the SDK keeps its calls on, so a request uses one connection."""
    global _shared
    if _shared is None:
        address = _variable("db_url")
        if address is None:
            raise RuntimeError("the component has no db_url variable")
        _shared = Database(address)
    return _shared


def _parameter(value: Value) -> postgres.ParameterValue:
    if value is None:
        return postgres.ParameterValue_DbNull()
    if isinstance(value, bool):
        return postgres.ParameterValue_Boolean(value)
    if isinstance(value, int):
        return postgres.ParameterValue_Int64(value)
    if isinstance(value, float):
        return postgres.ParameterValue_Floating64(value)
    return postgres.ParameterValue_Str(str(value))


def _value(cell: postgres.DbValue) -> Value:
    if isinstance(cell, postgres.DbValue_DbNull):
        return None
    value = getattr(cell, "value", None)
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def incoming_handler(tool: Tool) -> type:
    """The ``IncomingHandler`` class componentize-py exports for ``tool``."""

    class IncomingHandler(exports.IncomingHandler):
        def handle(self, request: IncomingRequest, response_out: ResponseOutparam) -> None:
            # componentize-py's generated event loop over wasi:io/poll has no annotations.
            loop = poll_loop.PollLoop()  # type: ignore[no-untyped-call]
            asyncio.set_event_loop(loop)
            loop.run_until_complete(_serve(tool, request, response_out))  # type: ignore[no-untyped-call]

    return IncomingHandler


async def _serve(tool: Tool, request: IncomingRequest, response_out: ResponseOutparam) -> None:
    method = request.method()
    name = method.value if isinstance(method, Method_Other) else _METHODS.get(type(method), "GET")
    # The target as sent, query included: what the signature covers.
    path = request.path_with_query() or "/"
    # The headers are a child of the request: dropped before its body is taken (Spin 3.6 traps otherwise).
    with request.headers() as fields:
        headers = {key.lower(): value.decode("latin-1") for key, value in fields.entries()}
    body = await _body(request)
    if body is None:
        reply = too_large()
    else:
        reply = await _answer(tool, name, path, headers, body)
    await _respond(response_out, reply)


async def _answer(tool: Tool, method: str, path: str, headers: dict[str, str], body: bytes) -> Reply:
    global _shared
    if _variable("db_url") is None:
        return error(500, "internal", "The component has no db_url variable.")
    chained = headers.get("spin-matched-route") == CHAINED_ROUTE
    try:
        server = ContractServer(tool, _variable("contract_secret"), PostgresStore(tool.name, database()))
        return await server.handle(method, path, headers, body, chained=chained)
    except Err as failure:  # the database: a crash Gatehouse retries
        log.error("%s of %s: the database refused: %r", path, tool.name, failure.value)
        _shared = None
        return error(503, "database_unavailable", "The tool could not reach its calls; try again.")


async def _body(request: IncomingRequest) -> Optional[bytes]:
    try:
        stream = poll_loop.Stream(request.consume())
    except Err:
        return b""
    chunks: list[bytes] = []
    size = 0
    while (chunk := await stream.next()) is not None:
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


async def _respond(response_out: ResponseOutparam, reply: Reply) -> None:
    encoded = reply.encoded()
    headers: list[tuple[str, bytes]] = [("content-type", b"application/json")]
    headers.extend((key, value.encode("latin-1")) for key, value in reply.headers.items())
    response = OutgoingResponse(Fields.from_list(headers))
    response.set_status_code(reply.status)
    outgoing = response.body()
    ResponseOutparam.set(response_out, Ok(response))
    sink = poll_loop.Sink(outgoing)
    await sink.send(encoded)
    sink.close()  # type: ignore[no-untyped-call]

