"""The contract server's rules, in-process: signatures, replays, unknown operations, the
ordering rules and execute's at-most-once, over both stores. The same rules are checked from
outside, against a running service, by the conformance kit (tests/e2e/tool_sdks.rs)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
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
    Refusal,
    Signed,
    check,
    checkpoint,
    contract_app,
    executed,
    sign,
    verify,
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
        if call.parameters["n"] == 8:
            raise ToolFailure("The counter went quiet.", may_have_acted=True)
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


def code(reply: Any) -> tuple[int, str]:
    return reply.status, reply.body["code"]


def test_a_wrong_stale_or_missing_signature_and_a_replay_are_refused_saying_which(store: Any) -> None:
    tool = Counter()
    server = ContractServer(tool, SECRET, store)
    body = {"tool_call_id": "tc_sig", "parameters": {"n": 2}}
    assert run(server, "prepare", body, secret="another-secret")[1]["code"] == "signature_mismatch"
    assert run(server, "prepare", body, at=time.time() - 301)[1]["code"] == "signature_stale"
    path, _, raw = signed("prepare", body)
    assert code(asyncio.run(server.handle("POST", path, {}, raw))) == (401, "signature_missing")
    # Signed for prepare, sent as execute: the path is signed.
    _, headers, raw = signed("prepare", body)
    assert code(asyncio.run(server.handle("POST", f"{BASE}/tool/execute", headers, raw))) == (401, "signature_mismatch")
    # A body changed after signing.
    path, headers, _ = signed("prepare", body)
    changed = json.dumps({**body, "parameters": {"n": 9}}).encode()
    assert code(asyncio.run(server.handle("POST", path, headers, changed))) == (401, "signature_mismatch")
    # An Idempotency-Key added on the way: the key is signed (empty when there is none).
    path, headers, raw = signed("prepare", body)
    keyed = {**headers, "idempotency-key": "k"}
    assert code(asyncio.run(server.handle("POST", path, keyed, raw))) == (401, "signature_mismatch")

    nonce = secrets.token_hex(16)
    assert run(server, "prepare", body, nonce=nonce)[0] == 200
    status, answer = run(server, "prepare", body, nonce=nonce)
    assert (status, answer["code"]) == (401, "signature_replayed") and "already used" in answer["error"]


def test_a_signed_describe_is_single_use_and_an_unsigned_one_is_answered(store: Any) -> None:
    server = ContractServer(Counter(), SECRET, store)
    path = f"{BASE}/tool/describe"
    header = {"x-gatehouse-contract-signature": sign(SECRET, int(time.time()), secrets.token_hex(16), "GET", path, b"")}
    assert asyncio.run(server.handle("GET", path, header, b"")).status == 200
    again = asyncio.run(server.handle("GET", path, header, b""))
    assert (again.status, again.body["code"]) == (401, "signature_replayed")
    assert asyncio.run(server.handle("GET", path, {}, b"")).status == 200


def _repository_file(relative: str) -> Path:
    """A file of the repository, found from wherever the tests were copied to."""
    for folder in Path(__file__).resolve().parents:
        if (folder / relative).is_file():
            return folder / relative
    raise FileNotFoundError(relative)


def _vector() -> dict[str, Any]:
    """openapi/signing-test-vector.json: the recipe's worked example."""
    loaded: dict[str, Any] = json.loads(_repository_file("openapi/signing-test-vector.json").read_text("utf-8"))
    return loaded


def test_the_docs_verification_snippet_accepts_the_vector_and_refuses_a_retarget_and_a_replay() -> None:
    """docs/tools.md's Python example for a backend ("What your backend receives"), run as written."""
    docs = _repository_file("docs/tools.md").read_text("utf-8")
    section = docs.split("### What your backend receives", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict[str, Any] = {}
    exec(compile(snippet, "docs/tools.md", "exec"), scope)
    refusal = scope["refusal"]
    v = _vector()
    assert v["header"] in docs, "docs/tools.md shows the vector's header"
    secret, body, key, at = v["secret"].encode(), v["body"].encode(), v["idempotency_key"], v["timestamp"] + 5
    spent: set[str] = set()
    assert refusal(secret, v["header"], v["method"], "/holds/H3", key, body, spent, now=at) == "signature_mismatch"
    assert refusal(secret, v["header"], v["method"], v["target"], "", body, spent, now=at) == "signature_mismatch"
    assert refusal(secret, v["header"], v["method"], v["target"], key, body, spent, now=at + 600) == "signature_stale"
    assert refusal(secret, None, v["method"], v["target"], key, body, spent, now=at) == "signature_missing"
    assert refusal(secret, v["header"], v["method"], v["target"], key, body, spent, now=at) is None
    assert refusal(secret, v["header"], v["method"], v["target"], key, body, spent, now=at) == "signature_replayed"


def test_the_published_test_vector_signs_and_verifies() -> None:
    v = _vector()
    body = v["body"].encode()
    key = v["idempotency_key"]
    header = sign(v["secret"], v["timestamp"], v["nonce"], v["method"], v["target"], body, idempotency_key=key)
    assert header == v["header"]
    now = v["timestamp"] + 10
    signed = check(v["secret"], v["header"], v["method"], v["target"], body, now, idempotency_key=key)
    assert signed == Signed(nonce=v["nonce"], expires_at=v["timestamp"] + 300)
    assert check(v["secret"], v["header"], v["method"], "/holds/H3", body, now, idempotency_key=key) == Refusal.MISMATCH
    assert check(v["secret"], v["header"], v["method"], v["target"], body, now) == Refusal.MISMATCH
    assert check(v["secret"], v["header"], v["method"], v["target"], body, now + 600, idempotency_key=key) == Refusal.STALE
    assert verify(v["secret"], None, v["method"], v["target"], body, now) is None


def test_validate_refuses_with_field_problems_and_accepts_with_the_sentence(store: Any) -> None:
    server = ContractServer(Counter(), SECRET, store)
    status, answer = run(server, "validate", {"parameters": {"n": 2}})
    assert status == 200 and answer == {"parameters": {"n": 2}, "summary": "I'll count to 2.", "needs_checkpoint": True}
    status, answer = run(server, "validate", {"parameters": {}})
    assert status == 422 and answer["fields"] == [{"field": "n", "problem": "is needed"}]
    status, answer = run(server, "validate", {"parameters": {"n": 11}})
    assert status == 422 and answer["fields"][0]["field"] == "n"
    status, answer = run(server, "validate", {"parameters": {"n": 1, "m": 2}})
    assert status == 422 and answer["fields"] == [{"field": "m", "problem": "is not something this tool takes"}]
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
    unsure = {"tool_call_id": "tc_eight", "parameters": {"n": 8}}
    run(server, "prepare", unsure)
    said = (422, {"error": "The counter went quiet.", "may_have_acted": True})
    assert run(server, "execute", unsure) == said
    assert run(server, "execute", unsure) == said

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


def test_a_refusal_reads_as_in_every_language() -> None:
    # The sentences are sdk/schema-problems.json's, which the Rust declared tool and the
    # TypeScript SDK say too (crates/declaration/src/parameters.rs, sdk/typescript/src/schema.ts).
    from gatehouse_tool.schema import check_parameters

    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}, "s": {"type": "string"}}}
    assert check_parameters(schema, {"n": 0}) == [{"field": "n", "problem": "must be at least 1"}]
    assert check_parameters(schema, {"s": 3}) == [{"field": "s", "problem": "must be text"}]
