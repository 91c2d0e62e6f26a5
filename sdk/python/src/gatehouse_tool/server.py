"""The tool contract around a :class:`~gatehouse_tool.tool.Tool`, independent of how requests
arrive (ASGI in :mod:`gatehouse_tool.asgi`): one request in, one answer out. It checks the
signature and spends its nonce, keeps the ordering rules and runs ``execute`` at most once per
call (:mod:`gatehouse_tool.ledger`), and answers in the contract's shapes and status codes.

It never writes Gatehouse's execution history: its answers carry no ``Gatehouse-Execution-Recorded``
header, so the lifecycle records each operation it sends, with the duration and outcome it saw
(docs/architecture.md, "Tools in any language")."""

from __future__ import annotations

import inspect
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from .contract import OPERATIONS, SIGNATURE_HEADER
from .ledger import Act, Answer, CallStore, MemoryStore, Refuse, decide, release, settle
from .signature import Refusal, Secret, check
from .tool import InvalidParameters, Tool, ToolFailure

log = logging.getLogger("gatehouse_tool")

MAX_BODY_BYTES = 256 * 1024
"""The largest request body read: Gatehouse's own bound on a call's parameters is 48 KiB."""
MAX_CLAIM_TRIES = 8


@dataclass(frozen=True)
class Reply:
    """An answer: a status and a JSON body."""

    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def error(status: int, code: str, message: str) -> Reply:
    """The contract's error shape: ``{"error": ..., "code": ...}``."""
    return Reply(status, {"error": message, "code": code})


def too_large() -> Reply:
    """The answer to a body past :data:`MAX_BODY_BYTES`, however it arrived."""
    return error(413, "payload_too_large", f"A request body may be at most {MAX_BODY_BYTES} bytes.")


async def _resolved(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class ContractServer:
    """Serves ``tool`` for requests signed with ``secret`` (a list of two while it is rotated).
    Without a secret (a component inside Gatehouse's application whose ``contract_secret`` is
    unset) only requests that came by service chaining are admitted, as the Rust tools do.
    ``store`` keeps the calls (see :mod:`gatehouse_tool.ledger`); ``clock`` gives unix seconds."""

    def __init__(
        self,
        tool: Tool,
        secret: Union[Secret, Sequence[Secret], None],
        store: Optional[CallStore] = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        secrets = [] if secret is None else [secret] if isinstance(secret, (str, bytes)) else list(secret)
        self.tool = tool
        self._secrets = [one for one in secrets if one]
        self._store: CallStore = store if store is not None else MemoryStore()
        self._clock = clock

    @property
    def signed(self) -> bool:
        """Whether requests must be signed (a secret is set)."""
        return bool(self._secrets)

    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes, chained: bool = False
    ) -> Reply:
        """Answers one request. ``path`` is the whole target the request was sent to, with its
        query if it had one (signed as such); ``headers`` are looked up lower-case; ``chained``
        says the request came from another component of the same Spin application (it never
        crossed a network)."""
        route = path.split("?", 1)[0]
        operation = route.rsplit("/tool/", 1)[1] if "/tool/" in route else ""
        if operation not in OPERATIONS:
            return error(404, "not_found", "This tool has no such operation.")
        if operation == "describe":
            # A describe may come unsigned; a signed one is single-use like every signed request.
            signature = headers.get(SIGNATURE_HEADER.lower())
            refused = self._spend(method, path, headers, body) if self._secrets and signature else None
            return refused or Reply(200, self.tool.describe())
        if method.upper() != "POST":
            return Reply(405, {"error": "Only POST.", "code": "method_not_allowed"}, {"allow": "POST"})
        if len(body) > MAX_BODY_BYTES:
            return too_large()
        if self._secrets:
            refused = self._spend(method, path, headers, body)
            if refused is not None:
                return refused
        elif not chained:
            return error(401, "unauthorized", "Without a contract_secret this tool answers only its own application.")
        try:
            request = json.loads(body)
        except ValueError:
            return error(400, "invalid_input", "The body is not JSON.")
        if not isinstance(request, dict) or not isinstance(request.get("parameters", {}), dict):
            return error(400, "invalid_input", "The body is a tool request: an object with `parameters`.")
        request.setdefault("parameters", {})
        if operation in ("validate", "summarize"):
            return await self._stateless(operation, request)
        call_id = request.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id or len(call_id) > 200:
            return error(400, "invalid_input", f"A {operation} needs the call's tool_call_id.")
        return await self._on_call(operation, call_id, request)

    def _spend(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Optional[Reply]:
        """None when the request's signature is good and its nonce was not spent before (it is
        now); else the 401 that says which part failed."""
        header = headers.get(SIGNATURE_HEADER.lower())
        key = headers.get("idempotency-key", "")
        checked = check(self._secrets, header, method, target, body, self._clock(), idempotency_key=key)
        if isinstance(checked, Refusal):
            return error(401, checked.value, checked.sentence)
        if not self._store.spend_nonce(checked.nonce, checked.expires_at):
            return error(401, Refusal.REPLAYED.value, Refusal.REPLAYED.sentence)
        return None

    async def _stateless(self, operation: str, request: dict[str, Any]) -> Reply:
        parameters = request["parameters"]
        try:
            if operation == "summarize":
                return Reply(200, {"summary": str(await _resolved(self.tool.summarize(parameters)))})
            accepted = await _resolved(self.tool.validate(parameters))
            summary = str(await _resolved(self.tool.summarize(accepted)))
            return Reply(200, {"parameters": accepted, "summary": summary, "needs_checkpoint": self.tool.needs_checkpoint})
        except InvalidParameters as refused:
            return Reply(422, {"error": "Some of the details aren't valid.", "fields": refused.problems})
        except ToolFailure as failure:
            return Reply(422, {"error": failure.message})
        except Exception:
            log.exception("%s of %s crashed", operation, self.tool.name)
            return error(500, "internal", f"The tool's {operation} crashed.")

    async def _on_call(self, operation: str, call_id: str, request: dict[str, Any]) -> Reply:
        for _ in range(MAX_CLAIM_TRIES):
            record, version = self._store.load(call_id)
            decision = decide(operation, record, request, self.tool.needs_checkpoint)
            if isinstance(decision, Answer):
                return Reply(decision.status, decision.body)
            if isinstance(decision, Refuse):
                return error(409, "invalid_state", decision.message)
            if self._store.save(call_id, decision.record, version):
                return await self._act(operation, call_id, decision, version + 1)
        return error(409, "invalid_state", "This call is being changed by another request; try again.")

    async def _act(self, operation: str, call_id: str, decision: Act, version: int) -> Reply:
        try:
            reply = await self._run(operation, decision)
        except Exception:
            log.exception("%s of %s for %s crashed", operation, self.tool.name, call_id)
            self._store.save(call_id, release(operation, decision.record), version)
            return error(500, "internal", f"The tool's {operation} crashed; it may be sent again.")
        # Only this claim's own record is settled: a later attempt that took it over settles its own.
        self._store.save(call_id, settle(operation, decision.record, reply.status, reply.body), version)
        return reply

    async def _run(self, operation: str, decision: Act) -> Reply:
        call = decision.call
        try:
            if operation == "prepare":
                checkpoint = await _resolved(self.tool.prepare(call))
                if checkpoint is None and self.tool.needs_checkpoint:
                    # Answering `checkpoint: null` would let the call run without the caller's
                    # second yes: the tool's bug is a crash, never "no checkpoint".
                    raise TypeError("prepare answers checkpoint(message, state): the tool declares needs_checkpoint")
                return Reply(200, {"checkpoint": checkpoint})
            if operation == "execute":
                done = await _resolved(self.tool.execute(call))
                if not isinstance(done, dict) or "voice_response" not in done:
                    raise TypeError("execute answers executed(result, voice_response)")
                return Reply(200, {"result": done.get("result"), "voice_response": str(done["voice_response"])})
            await _resolved(self.tool.discard(call))
            return Reply(200, {"discarded": True})
        except ToolFailure as failure:
            refusal: dict[str, Any] = {"error": failure.message}
            if failure.may_have_acted and operation == "execute":
                refusal["may_have_acted"] = True
            return Reply(422, refusal)
