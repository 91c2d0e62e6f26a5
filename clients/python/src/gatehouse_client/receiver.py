"""Receiving Gatehouse's callbacks: a handler class for the standard library's ``http.server`` and
an ASGI application, both checking ``X-Gatehouse-Signature`` with ``verify_callback`` (over the
path the callback came to, spending its nonce once) before the relay's code sees a byte of the
body. Behind a proxy that rewrites the path, pass ``public_path``: the path Gatehouse posts to."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Sequence, Tuple, Type, Union

from .signature import Bytes, SpentNonces, verify_callback


@dataclass
class Callback:
    """A verified callback: its kind (``progress``, ``checkpoint``, ``completion``), the parsed body,
    the raw bytes, the request headers and the path (and query) it was verified for."""

    kind: str
    body: Dict[str, Any]
    raw: bytes
    headers: Mapping[str, str]
    target: str = ""


Answer = Optional[Dict[str, Any]]
"""What the relay answers: for a progress callback ``{"cancel": True, "reason": ...}`` stops the
call; at a direct flow's gate only ``{"continue": True}`` lets it go on. None means ``{}``."""


def _kind(headers: Mapping[str, str], body: Dict[str, Any]) -> str:
    kind = headers.get("x-gatehouse-callback") or headers.get("X-Gatehouse-Callback")
    if kind:
        return kind
    if "checkpoint" in body:
        return "checkpoint"
    if "gate" in body:
        return "progress"
    return "completion"


Secrets = Union[Bytes, Sequence[Bytes], Mapping[str, Union[Bytes, Sequence[Bytes]]]]
"""A tenant's callback secret (or several while it is rotated), or, for a relay serving several
tenants, each tenant's by its id: the callback's ``X-Gatehouse-Tenant`` picks one, and the signed
payload must name the same tenant."""


def _check(
    secret: Secrets, tolerance: int, nonces: SpentNonces, headers: Mapping[str, str], target: str, raw: bytes
) -> Tuple[int, Optional[Dict[str, Any]], Optional[Callback]]:
    """(status, answer-or-None, Callback-or-None)."""
    tenant = headers.get("x-gatehouse-tenant")
    keys = secret.get(tenant or "") if isinstance(secret, Mapping) else secret
    if keys is None or not verify_callback(keys, headers.get("x-gatehouse-signature"), target, raw, tolerance, nonces=nonces):
        return 401, {"error": "bad signature"}, None
    try:
        body = json.loads(raw)
        if not isinstance(body, dict):
            raise ValueError("not an object")
    except ValueError:
        return 400, {"error": "not JSON"}, None
    if isinstance(secret, Mapping) and body.get("tenant") != tenant:
        return 401, {"error": "bad signature"}, None
    return 200, None, Callback(_kind(headers, body), body, raw, headers, target)


def _target(scope: Dict[str, Any]) -> str:
    """The path and query as the request line had them: ``raw_path`` is the path before any mount
    point was taken off (``path`` alone), as the signature saw it."""
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if isinstance(raw_path, bytes) else scope.get("root_path", "") + scope.get("path", "")
    query = scope.get("query_string", b"")
    return f"{path}?{query.decode('latin-1')}" if query else path


def make_callback_handler(
    secret: Secrets,
    on_callback: Callable[[Callback], Answer],
    *,
    tolerance: int = 300,
    on_rejected: Optional[Callable[[str], None]] = None,
    max_body_bytes: int = 1 << 20,
    nonces: Optional[SpentNonces] = None,
    public_path: Optional[str] = None,
) -> Type[BaseHTTPRequestHandler]:
    """A ``BaseHTTPRequestHandler`` class for ``http.server.ThreadingHTTPServer``: every POST is
    verified, then handed to ``on_callback``; a forged, tampered or replayed one is answered 401
    and never reaches it. ``secret`` may be a list while it is rotated, or a mapping of tenant ids to
    secrets for a relay serving several tenants. ``nonces`` is where spent
    nonces are kept (one :class:`SpentNonces` per handler class by default)."""
    spent = nonces or SpentNonces()

    class GatehouseCallbackHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet by default
            pass

        def _reply(self, status: int, answer: Dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length > max_body_bytes:
                self._reply(413, {"error": "body too large"})
                return
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, answer, callback = _check(secret, tolerance, spent, headers, public_path or self.path, raw)
            if callback is None:
                if on_rejected:
                    on_rejected("signature" if status == 401 else "not JSON")
                self._reply(status, answer or {})
                return
            try:
                self._reply(200, on_callback(callback) or {})
            except Exception as error:  # the relay's own bug: Gatehouse retries checkpoint/completion
                self._reply(500, {"error": str(error)})

    return GatehouseCallbackHandler


def callback_asgi_app(
    secret: Secrets,
    on_callback: Callable[[Callback], Union[Answer, Awaitable[Answer]]],
    *,
    tolerance: int = 300,
    on_rejected: Optional[Callable[[str], None]] = None,
    max_body_bytes: int = 1 << 20,
    nonces: Optional[SpentNonces] = None,
    public_path: Optional[str] = None,
) -> Callable[..., Awaitable[None]]:
    """The same as an ASGI application (mount it under Starlette, FastAPI, or serve it with any
    ASGI server). ``on_callback`` may be a coroutine function."""
    spent = nonces or SpentNonces()

    async def app(scope: Dict[str, Any], receive: Callable[[], Awaitable[Dict[str, Any]]], send: Callable[[Dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return

        async def reply(status: int, answer: Dict[str, Any]) -> None:
            data = json.dumps(answer).encode()
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

        if scope["method"] != "POST":
            await reply(405, {"error": "POST only"})
            return
        chunks = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > max_body_bytes:
                await reply(413, {"error": "body too large"})
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        raw = b"".join(chunks)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        status, answer, callback = _check(secret, tolerance, spent, headers, public_path or _target(scope), raw)
        if callback is None:
            if on_rejected:
                on_rejected("signature" if status == 401 else "not JSON")
            await reply(status, answer or {})
            return
        result = on_callback(callback)
        if inspect.isawaitable(result):
            result = await result
        await reply(200, result or {})

    return app
