"""The contract as an ASGI application, for a tool that lives beside a team's own code: mount it
in FastAPI or Starlette (``app.mount("/gatehouse", contract_app(tool, secret=...))``) and register
its base URL with Gatehouse (``tool_registry``: ``name=https://service.example.com/gatehouse``).

A body is read up to :data:`~gatehouse_tool.server.MAX_BODY_BYTES`; the target that is checked
against the signature is the one the request was sent to (``raw_path`` and the query), mount
prefix included."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, MutableMapping, Optional, Sequence, Union

from .ledger import CallStore
from .server import MAX_BODY_BYTES, ContractServer, Reply, too_large
from .signature import Secret
from .tool import Tool

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ContractApp:
    """An ASGI application serving one tool's contract under whatever prefix it is mounted at."""

    def __init__(self, server: ContractServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = await _body(receive)
        if body is None:
            reply = too_large()
        else:
            headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
            reply = await self.server.handle(scope["method"], _path(scope), headers, body)
        await _respond(send, reply)


def contract_app(
    tool: Tool,
    secret: Union[Secret, Sequence[Secret]],
    store: Optional[CallStore] = None,
) -> ContractApp:
    """The ASGI application for ``tool``, requiring requests signed with ``secret``: a service
    on its own host has no other way to know a request came from Gatehouse."""
    server = ContractServer(tool, secret, store)
    if not server.signed:
        raise ValueError("a tool outside Gatehouse's application needs its contract_secret")
    return ContractApp(server)


def _path(scope: Scope) -> str:
    """The request target as sent, path and query, which is what a signature covers."""
    query = bytes(scope.get("query_string") or b"").decode("latin-1")
    raw = scope.get("raw_path")
    if isinstance(raw, (bytes, bytearray)) and raw:
        path = bytes(raw).split(b"?", 1)[0].decode("latin-1")
    else:
        path = f"{scope.get('root_path', '')}{scope['path']}"
    return f"{path}?{query}" if query else path


async def _body(receive: Receive) -> Optional[bytes]:
    """The whole body, or None once it passes the bound (the rest is not read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(chunks)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _respond(send: Send, reply: Reply) -> None:
    body = reply.encoded()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers.extend((key.encode("latin-1"), value.encode("latin-1")) for key, value in reply.headers.items())
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
