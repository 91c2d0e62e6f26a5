"""The seed's conversation against the running application, sync and async, every callback checked
with the client's own verify_callback."""

import asyncio
import json
import time

import httpx

from gatehouse_client import AsyncGatehouse, Callback, callback_asgi_app, is_tool_call, sign_callback, verify_callback

from conftest import SECRET, SEED_EMAIL, URL, TOKEN, Receiver, client, session, traceparent


def check_deliveries(receiver: Receiver, tool_call_id: str, trace_id: str) -> list:
    mine = [c for c in receiver.callbacks if c.body["tool_call_id"] == tool_call_id]
    assert [c.kind for c in mine] == ["progress", "checkpoint", "completion"]
    for c in mine:
        header = c.headers["x-gatehouse-signature"]
        assert c.target == "/callbacks"
        assert verify_callback(SECRET, header, c.target, c.raw), "genuine"
        assert c.body["trace_id"] == trace_id
        assert c.headers["traceparent"].split("-")[1] == trace_id
    assert receiver.rejected == []
    return mine


def test_seed_conversation_sync(receiver):
    gh = client()
    trace = traceparent()
    trace_id = trace.split("-")[1]
    session_id = session("seed")
    created = gh.create_tool_call(
        {"session_id": session_id, "function_name": "send_email", "callback_url": receiver.url, "parameters": SEED_EMAIL},
        traceparent=trace,
    )
    assert created["status"] == "PENDING" and "john@gmail.com" in created["message"]
    id = created["tool_call_id"]

    modified = gh.modify_tool_call(id, {"parameters": {"to": "john.smith@gmail.com"}, "reason": "caller corrected the address"}, traceparent=trace)
    assert modified["modification_applied"] == {"field": "to", "old": "john@gmail.com", "new": "john.smith@gmail.com"}
    assert "john.smith@gmail.com" in modified["message"]

    confirmed = gh.confirm_tool_call(id, traceparent=trace)
    assert not is_tool_call(confirmed) and confirmed["status"] == "EXECUTING"

    checkpoint = receiver.next("checkpoint", id)
    assert checkpoint.body["status"] == "PREPARED"
    assert checkpoint.body["resume_webhook"] == f"/resume-execution/{id}"
    assert "john.smith@gmail.com" in checkpoint.body["message"]

    resumed = gh.resume_execution(id, {"action": "proceed"}, wait=10, traceparent=trace)
    assert is_tool_call(resumed) and resumed["status"] == "COMPLETED"
    assert resumed["trace_id"] == trace_id

    completion = receiver.next("completion", id)
    assert completion.body["status"] == "COMPLETED"
    assert "john.smith@gmail.com" in completion.body["voice_response"]
    assert gh.get_session_calls(session_id)["recent_total"] == 1
    listed = gh.list_tool_calls(session_id=session_id, status="COMPLETED")
    assert [c["tool_call_id"] for c in listed["calls"]] == [id] and listed["next_cursor"] is None
    attempts = gh.list_callback_attempts(id)["callbacks"]
    assert [(a["kind"], a["attempt"], a["status_code"]) for a in attempts] == [
        ("progress", 1, 200), ("checkpoint", 1, 200), ("completion", 1, 200)]

    mine = check_deliveries(receiver, id, trace_id)
    last = mine[-1]
    header = last.headers["x-gatehouse-signature"]
    t = int(header.split(",")[0][2:])
    assert not verify_callback(SECRET, header, last.target, last.raw.replace(b"COMPLETED", b"CANCELLED")), "tampered body"
    assert not verify_callback(SECRET, header, "/other-relay", last.raw), "posted to another path"
    assert not verify_callback("not-the-secret", header, last.target, last.raw), "wrong secret"
    assert not verify_callback(SECRET, header, last.target, last.raw, 300, now=t + 301), "stale timestamp"


def test_seed_conversation_async(receiver):
    async def conversation():
        trace = traceparent()
        async with AsyncGatehouse(URL, TOKEN) as gh:
            created = await gh.create_tool_call(
                {"session_id": session("aseed"), "function_name": "send_email", "callback_url": receiver.url, "parameters": SEED_EMAIL},
                traceparent=trace,
            )
            id = created["tool_call_id"]
            await gh.modify_tool_call(id, {"parameters": {"to": "john.smith@gmail.com"}})
            prepared = await gh.confirm_tool_call(id, wait=10)
            assert is_tool_call(prepared) and prepared["status"] == "PREPARED"
            done = await gh.resume_execution(id, {"action": "proceed"}, wait=10)
            assert done["status"] == "COMPLETED"
            return id, trace.split("-")[1]

    id, trace_id = asyncio.run(conversation())
    receiver.next("completion", id)
    check_deliveries(receiver, id, trace_id)


def test_the_http_server_receiver_refuses_forged_tampered_and_stale_callbacks(receiver):
    body = json.dumps({"tool_call_id": "tc_0123456789ab", "session_id": "s", "status": "COMPLETED", "result": None,
                       "voice_response": "sent", "execution_time_ms": 1, "trace_id": None})
    now = int(time.time())

    def post(signature, payload=body):
        return httpx.post(receiver.url, content=payload, headers={"X-Gatehouse-Signature": signature, "X-Gatehouse-Callback": "completion"}).status_code

    genuine = sign_callback(SECRET, "/callbacks", body, now)
    assert post(genuine) == 200
    assert post(genuine) == 401, "replayed: its nonce was spent"
    assert post(sign_callback(SECRET, "/callbacks", body, now), body.replace("sent", "lost")) == 401
    assert post(sign_callback(SECRET, "/other-relay", body, now)) == 401
    assert post(sign_callback("wrong", "/callbacks", body, now)) == 401
    assert post(sign_callback(SECRET, "/callbacks", body, now - 600)) == 401
    assert len(receiver.callbacks) == 1 and len(receiver.rejected) == 5


def test_the_asgi_receiver_passes_real_callbacks_and_refuses_altered_ones():
    received, rejected = [], []

    async def on_callback(callback: Callback):
        received.append(callback)
        return {"continue": True}

    app = callback_asgi_app(SECRET, on_callback, on_rejected=rejected.append)

    async def deliver(raw: bytes, headers: dict):
        sent = []
        messages = [{"type": "http.request", "body": raw[:10], "more_body": True}, {"type": "http.request", "body": raw[10:]}]

        async def receive():
            return messages.pop(0)

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/callbacks", "raw_path": b"/callbacks", "query_string": b"",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
        await app(scope, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    # A real delivery from the application, captured by the http.server receiver.
    r = Receiver()
    try:
        gh = client()
        created = gh.create_tool_call({"session_id": session("asgi"), "function_name": "send_email", "callback_url": r.url, "parameters": SEED_EMAIL})
        gh.cancel_tool_call(created["tool_call_id"])
        real = r.next("completion", created["tool_call_id"])
    finally:
        r.close()
    headers = {"x-gatehouse-signature": real.headers["x-gatehouse-signature"], "x-gatehouse-callback": "completion"}
    assert asyncio.run(deliver(real.raw, headers)) == (200, {"continue": True})
    assert received[0].body["status"] == "CANCELLED" and received[0].kind == "completion"
    assert asyncio.run(deliver(real.raw, headers))[0] == 401, "replayed"
    fresh = sign_callback(SECRET, "/callbacks", real.raw.replace(b"CANCELLED", b"COMPLETED"))
    assert asyncio.run(deliver(real.raw, {**headers, "x-gatehouse-signature": fresh}))[0] == 401
    assert asyncio.run(deliver(real.raw, {**headers, "x-gatehouse-signature": sign_callback("wrong", "/callbacks", real.raw)}))[0] == 401
    stale = sign_callback(SECRET, "/callbacks", real.raw, int(time.time()) - 900)
    assert asyncio.run(deliver(real.raw, {**headers, "x-gatehouse-signature": stale}))[0] == 401
    assert len(received) == 1 and rejected == ["signature"] * 4


def test_a_progress_callback_answered_with_cancel_stops_the_call():
    r = Receiver(lambda c: {"cancel": True, "reason": "caller hung up"} if c.kind == "progress" else None)
    try:
        gh = client()
        created = gh.create_tool_call({"session_id": session("cancel"), "function_name": "send_email", "callback_url": r.url, "parameters": SEED_EMAIL})
        settled = gh.confirm_tool_call(created["tool_call_id"], wait=10)
        assert is_tool_call(settled) and settled["status"] == "CANCELLED"
        assert r.next("completion", created["tool_call_id"]).body["status"] == "CANCELLED"
    finally:
        r.close()


# The fields of the SQL functions tool_call_summary_json and tool_call_json (migrations/V13).
SUMMARY_FIELDS = {
    "tool_call_id", "session_id", "connection_id", "intent_id", "function_name", "tool", "parameters", "status", "status_since",
    "summary",
    "voice_response", "error_message", "attempts", "corrections", "current_operation", "next_retry_at", "overdue", "expires_at",
    "created_at", "completed_at",
}
FULL_FIELDS = SUMMARY_FIELDS | {
    "tenant", "parameters_history", "status_history", "checkpoint", "result", "callback_url", "side_effect_started_at",
    "trace_id", "confirmed_at", "prepared_at", "executed_at", "execution_time_ms",
}


def test_the_list_answers_summaries_the_status_route_the_call_in_full(receiver):
    gh = client()
    session_id = session("summary")
    created = gh.create_tool_call({"session_id": session_id, "function_name": "send_email", "callback_url": receiver.url, "parameters": SEED_EMAIL})
    id = created["tool_call_id"]
    gh.modify_tool_call(id, {"parameters": {"to": "john.smith@gmail.com"}})

    [pending] = gh.list_tool_calls(session_id=session_id)["calls"]
    assert set(pending) == SUMMARY_FIELDS, "a summary: parameters but no histories or result"
    assert pending["status"] == "PENDING" and pending["current_operation"] == "awaiting_confirmation"
    assert pending["corrections"] == 1 and pending["overdue"] is False and pending["next_retry_at"] is None
    full = gh.get_tool_call(id)
    assert set(full) == FULL_FIELDS
    assert full["status_since"] == full["status_history"][-1]["timestamp"]
    assert all(full[f] == pending[f] for f in SUMMARY_FIELDS)

    prepared = gh.confirm_tool_call(id, wait=10)
    assert is_tool_call(prepared) and set(prepared) == FULL_FIELDS
    assert prepared["status"] == "PREPARED" and prepared["current_operation"] == "awaiting_resume"
    done = gh.resume_execution(id, {"action": "proceed"}, wait=10)
    assert is_tool_call(done) and done["status"] == "COMPLETED" and done["current_operation"] is None
    [settled] = gh.list_tool_calls(session_id=session_id)["calls"]
    assert settled["status"] == "COMPLETED" and settled["current_operation"] is None
    assert settled["voice_response"] == done["voice_response"]
    receiver.next("completion", id)


def test_the_sweep_reports_what_it_did_discards_retried_included():
    report = client().sweep()
    assert set(report) == {"expired", "failed", "redriven", "reported", "discards_retried", "session_context_purged"}
    assert all(isinstance(v, int) and v >= 0 for v in report.values())
