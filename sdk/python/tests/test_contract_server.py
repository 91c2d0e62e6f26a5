"""The contract server's rules, in-process: signatures, replays, unknown operations, the
ordering rules and execute's at-most-once, over both stores. The same rules are checked from
outside, against a running service, by the conformance kit (tests/e2e/tool_sdks.rs)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

import pytest

from gatehouse_tool import (
    Call,
    Checkpoint,
    Executed,
    ContractServer,
    MemoryStore,
    SqliteStore,
    Tool,
    ToolFailure,
    checkpoint,
    contract_app,
    executed,
    sign,
)

SECRET = "contract-secret-for-tests"
BASE = "/gatehouse"


class Counter(Tool):
    """Counts what it really did."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            name="count",
            description="Counts.",
            parameters_schema={
                "type": "object",
                "required": ["n"],
                "additionalProperties": False,
                "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}},
            },
            **kwargs,
        )
        self.done: list[str] = []
        self.discarded: list[str] = []
        self.crash_next_execute = False
        self.seen_may_have_started: list[bool] = []

    def summarize(self, parameters: dict[str, Any]) -> str:
        return f"I'll count to {parameters['n']}."

    async def prepare(self, call: Call) -> Checkpoint | None:
        await asyncio.sleep(0)
        return checkpoint(f"Ready to count to {call.parameters['n']}.", {"n": call.parameters["n"]})

    def execute(self, call: Call) -> Executed:
        self.seen_may_have_started.append(call.side_effect_may_have_started)
        if self.crash_next_execute:
            self.crash_next_execute = False
            raise RuntimeError("the backend went away")
        if call.parameters["n"] == 7:
            raise ToolFailure("Seven is unlucky.")
        self.done.append(call.tool_call_id)
        return executed({"counted": call.parameters["n"]}, f"Counted to {call.parameters['n']}.")

    def discard(self, call: Call) -> None:
        self.discarded.append(call.tool_call_id)


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Any:
    return MemoryStore() if request.param == "memory" else SqliteStore(str(tmp_path / "calls.sqlite3"))


def signed(operation: str, body: dict[str, Any], secret: str = SECRET, at: float | None = None, nonce: str | None = None) -> tuple[str, dict[str, str], bytes]:
    path = f"{BASE}/tool/{operation}"
    raw = json.dumps(body).encode()
    header = sign(secret, int(time.time() if at is None else at), nonce or secrets.token_hex(16), "POST", path, raw)
    return path, {"x-gatehouse-contract-signature": header}, raw


def run(server: ContractServer, operation: str, body: dict[str, Any], **kwargs: Any) -> tuple[int, Any]:
    path, headers, raw = signed(operation, body, **kwargs)
    reply = asyncio.run(server.handle("POST", path, headers, raw))
    return reply.status, reply.body


def test_describe_answers_unsigned_and_unknown_operations_are_404(store: Any) -> None:
    server = ContractServer(Counter(), SECRET, store)
    described = asyncio.run(server.handle("GET", f"{BASE}/tool/describe", {}, b""))
    assert described.status == 200 and described.body["name"] == "count" and described.body["needs_checkpoint"]
    for method in ("GET", "POST", "DELETE"):
        unknown = asyncio.run(server.handle(method, f"{BASE}/tool/launch", {}, b""))
        assert (unknown.status, unknown.body["code"]) == (404, "not_found")
    not_post = asyncio.run(server.handle("GET", f"{BASE}/tool/execute", {}, b""))
    assert (not_post.status, not_post.body["code"]) == (405, "method_not_allowed")


def test_a_wrong_stale_or_missing_signature_and_a_replay_are_refused(store: Any) -> None:
    tool = Counter()
    server = ContractServer(tool, SECRET, store)
    body = {"tool_call_id": "tc_sig", "parameters": {"n": 2}}
    assert run(server, "prepare", body, secret="another-secret")[0] == 401
    assert run(server, "prepare", body, at=time.time() - 301)[0] == 401
    path, _, raw = signed("prepare", body)
    assert asyncio.run(server.handle("POST", path, {}, raw)).status == 401
    # Signed for prepare, sent as execute: the path is signed.
    _, headers, raw = signed("prepare", body)
    assert asyncio.run(server.handle("POST", f"{BASE}/tool/execute", headers, raw)).status == 401
    # A body changed after signing.
    path, headers, _ = signed("prepare", body)
    assert asyncio.run(server.handle("POST", path, headers, json.dumps({**body, "parameters": {"n": 9}}).encode())).status == 401

    nonce = secrets.token_hex(16)
    assert run(server, "prepare", body, nonce=nonce)[0] == 200
    status, answer = run(server, "prepare", body, nonce=nonce)
    assert (status, answer["code"]) == (401, "unauthorized") and "already used" in answer["error"]


def test_validate_refuses_with_field_problems_and_accepts_with_the_sentence(store: Any) -> None:
    server = ContractServer(Counter(), SECRET, store)
    status, answer = run(server, "validate", {"parameters": {"n": 2}})
    assert status == 200 and answer == {"parameters": {"n": 2}, "summary": "I'll count to 2.", "needs_checkpoint": True}
    status, answer = run(server, "validate", {"parameters": {}})
    assert status == 422 and answer["fields"] == [{"field": "n", "problem": "is required"}]
    status, answer = run(server, "validate", {"parameters": {"n": 11}})
    assert status == 422 and answer["fields"][0]["field"] == "n"
    status, answer = run(server, "validate", {"parameters": {"n": 1, "m": 2}})
    assert status == 422 and answer["fields"] == [{"field": "m", "problem": "is not a parameter of this tool"}]
    assert run(server, "summarize", {"parameters": {"n": 3}}) == (200, {"summary": "I'll count to 3."})


def test_execute_runs_once_and_a_repeat_answers_the_first_answer(store: Any) -> None:
    tool = Counter()
    server = ContractServer(tool, SECRET, store)
    call = {"tool_call_id": "tc_once", "parameters": {"n": 3}}
    status, prepared = run(server, "prepare", call)
    assert status == 200 and prepared["checkpoint"]["state"] == {"n": 3}
    assert run(server, "prepare", call) == (200, prepared)
    # A later request's parameters are not the call's: the recorded ones are used.
    first = run(server, "execute", {**call, "parameters": {"n": 9}, "checkpoint": prepared["checkpoint"]})
    assert first == (200, {"result": {"counted": 3}, "voice_response": "Counted to 3."})
    assert run(server, "execute", call) == first
    assert tool.done == ["tc_once"]
    status, answer = run(server, "discard", call)
    assert (status, answer["code"]) == (409, "invalid_state")


def test_the_ordering_rules(store: Any) -> None:
    tool = Counter()
    server = ContractServer(tool, SECRET, store)
    assert run(server, "execute", {"tool_call_id": "tc_never", "parameters": {"n": 1}})[0] == 409
    call = {"tool_call_id": "tc_discarded", "parameters": {"n": 1}}
    assert run(server, "prepare", call)[0] == 200
    assert run(server, "discard", call) == (200, {"discarded": True})
    assert run(server, "discard", call) == (200, {"discarded": True})
    assert run(server, "prepare", call)[0] == 409
    assert run(server, "execute", call)[0] == 409
    assert tool.discarded == ["tc_discarded"] and tool.done == []
    assert run(server, "prepare", {"parameters": {"n": 1}})[0] == 400


def test_a_failure_is_the_calls_answer_and_a_crash_is_run_again_as_may_have_started(store: Any) -> None:
    tool = Counter()
    server = ContractServer(tool, SECRET, store)
    unlucky = {"tool_call_id": "tc_seven", "parameters": {"n": 7}}
    run(server, "prepare", unlucky)
    assert run(server, "execute", unlucky) == (422, {"error": "Seven is unlucky."})
    assert run(server, "execute", unlucky) == (422, {"error": "Seven is unlucky."})

    crashing = {"tool_call_id": "tc_crash", "parameters": {"n": 4}}
    run(server, "prepare", crashing)
    tool.crash_next_execute = True
    status, answer = run(server, "execute", crashing)
    assert (status, answer["code"]) == (500, "internal")
    assert run(server, "execute", {**crashing, "attempt": 2})[0] == 200
    assert tool.seen_may_have_started[-2:] == [False, True] and tool.done == ["tc_crash"]


def test_two_workers_sharing_an_sqlite_file_run_execute_once(tmp_path: Any) -> None:
    tool = Counter()
    path = str(tmp_path / "shared.sqlite3")
    first, second = ContractServer(tool, SECRET, SqliteStore(path)), ContractServer(tool, SECRET, SqliteStore(path))
    call = {"tool_call_id": "tc_workers", "parameters": {"n": 5}}
    run(first, "prepare", call)
    assert run(first, "execute", call) == run(second, "execute", call)
    assert tool.done == ["tc_workers"]
    nonce = secrets.token_hex(16)
    assert run(first, "summarize", call, nonce=nonce)[0] == 200
    assert run(second, "summarize", call, nonce=nonce)[0] == 401


def asgi(app: Any, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], Any]:
    """One request through an ASGI application, as a server would send it."""
    sent: list[dict[str, Any]] = []
    chunks = [body[i : i + 4096] for i in range(0, len(body), 4096)] or [b""]

    async def receive() -> dict[str, Any]:
        chunk = chunks.pop(0) if chunks else b""
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks)}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http", "method": method, "path": path, "raw_path": path.encode(), "root_path": "",
        "query_string": b"", "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    asyncio.run(app(scope, receive, send))
    start = sent[0]
    answer_headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], answer_headers, json.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def test_the_asgi_app_checks_the_path_it_is_mounted_at() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = Starlette(routes=[Mount(BASE, app=contract_app(Counter(), secret=SECRET))])
    assert asgi(app, "GET", f"{BASE}/tool/describe", {}, b"")[2]["name"] == "count"
    path, headers, raw = signed("validate", {"parameters": {"n": 2}})
    status, answer_headers, answer = asgi(app, "POST", path, headers, raw)
    assert status == 200 and answer["summary"] == "I'll count to 2."
    assert "gatehouse-execution-recorded" not in answer_headers
    # Signed for the path without the mount prefix: not the path it was sent to.
    _, headers, raw = signed("validate", {"parameters": {"n": 2}})
    unprefixed = sign(SECRET, int(time.time()), secrets.token_hex(16), "POST", "/tool/validate", raw)
    assert asgi(app, "POST", path, {"x-gatehouse-contract-signature": unprefixed}, raw)[0] == 401
    status, _, answer = asgi(app, "POST", path, headers, b"x" * (256 * 1024 + 1))
    assert (status, answer["code"]) == (413, "payload_too_large")


def test_without_a_secret_only_chained_requests_are_answered() -> None:
    with pytest.raises(ValueError):
        contract_app(Counter(), secret="")
    server = ContractServer(Counter(), None)
    body = json.dumps({"parameters": {"n": 1}}).encode()
    from_outside = asyncio.run(server.handle("POST", "/tool/summarize", {}, body))
    assert (from_outside.status, from_outside.body["code"]) == (401, "unauthorized")
    chained = asyncio.run(server.handle("POST", "/tool/summarize", {}, body, chained=True))
    assert (chained.status, chained.body) == (200, {"summary": "I'll count to 1."})
