"""Retries only where they are safe, through a misbehaving proxy in front of the real application."""

import asyncio
import socket
import time

import pytest

from gatehouse_client import (
    AsyncGatehouse, CallbackUrlConflictError, DatabaseUnavailableError, DeadlineExceededError, GatehouseConnectionError,
    RequestTimeoutError, TooManyOpenCallsError,
)

from conftest import BODY_READ_TIMEOUT, SEED_EMAIL, TOKEN, Proxy, client, raw_answer, session

UNAVAILABLE = raw_answer(503, "Service Unavailable", {"error": "I can't reach my records right now.", "code": "database_unavailable"}, {"Retry-After": "1"})


def create(gh, session_id):
    return gh.create_tool_call({"session_id": session_id, "function_name": "send_email", "parameters": SEED_EMAIL})


def test_a_create_whose_answer_is_lost_is_retried_with_the_same_key_and_makes_one_call():
    proxy = Proxy(lambda n: "drop" if n == 0 else "forward")
    try:
        session_id = session("drop")
        created = create(client(base_url=proxy.url), session_id)
        assert proxy.stats["dropped"] == 1 and proxy.stats["forwarded"] >= 1
        context = client().get_session_calls(session_id)
        assert context["pending_total"] == 1
        assert context["pending"][0]["tool_call_id"] == created["tool_call_id"]
    finally:
        proxy.close()


def test_the_async_client_retries_a_lost_create_the_same_way():
    proxy = Proxy(lambda n: "drop" if n == 0 else "forward")
    session_id = session("adrop")

    async def run():
        async with AsyncGatehouse(proxy.url, TOKEN) as gh:
            return await create(gh, session_id)

    try:
        created = asyncio.run(run())
        assert proxy.stats["dropped"] == 1
        context = client().get_session_calls(session_id)
        assert context["pending_total"] == 1 and context["pending"][0]["tool_call_id"] == created["tool_call_id"]
    finally:
        proxy.close()


def test_a_confirm_whose_answer_is_lost_is_not_sent_again():
    gh = client()
    created = create(gh, session("confirm-drop"))
    proxy = Proxy(lambda n: "drop" if n == 0 else "forward")
    try:
        with pytest.raises(GatehouseConnectionError) as raised:
            client(base_url=proxy.url).confirm_tool_call(created["tool_call_id"])
        assert raised.value.maybe_sent is True
        assert proxy.stats["connections"] == 1
        assert gh.get_tool_call(created["tool_call_id"], wait=10)["status"] != "PENDING"
    finally:
        proxy.close()


def test_a_503_with_retry_after_is_waited_out_and_the_retry_reaches_the_application():
    proxy = Proxy(lambda n: UNAVAILABLE if n == 0 else "forward")
    try:
        session_id = session("503")
        started = time.monotonic()
        created = create(client(base_url=proxy.url), session_id)
        assert time.monotonic() - started >= 1.0
        assert proxy.stats["answered"] == 1 and proxy.stats["forwarded"] >= 1
        assert created["status"] == "PENDING"
        assert client().get_session_calls(session_id)["pending_total"] == 1
    finally:
        proxy.close()


def test_the_async_client_waits_out_a_503_too():
    proxy = Proxy(lambda n: UNAVAILABLE if n == 0 else "forward")

    async def run():
        async with AsyncGatehouse(proxy.url, TOKEN) as gh:
            started = time.monotonic()
            tools = await gh.list_tools()
            return tools, time.monotonic() - started

    try:
        tools, elapsed = asyncio.run(run())
        assert elapsed >= 1.0 and proxy.stats["answered"] == 1
        assert any(t["name"] == "send_email" for t in tools["tools"])
    finally:
        proxy.close()


def test_a_modify_refused_with_503_is_retried_and_goes_through():
    created = create(client(), session("503-modify"))
    proxy = Proxy(lambda n: UNAVAILABLE if n == 0 else "forward")
    try:
        modified = client(base_url=proxy.url).modify_tool_call(created["tool_call_id"], {"parameters": {"to": "john.smith@gmail.com"}})
        assert modified["updated_parameters"]["to"] == "john.smith@gmail.com"
        assert proxy.stats["answered"] == 1
    finally:
        proxy.close()


def test_a_modify_stopped_at_its_deadline_is_not_sent_again_whatever_its_retry_after():
    created = create(client(), session("503-deadline"))
    stopped = raw_answer(503, "Service Unavailable", {"error": "The request took longer than the server allows (300 s) and was stopped.",
                                                      "code": "deadline_exceeded"}, {"Retry-After": "1"})
    proxy = Proxy(lambda n: stopped if n == 0 else "forward")
    try:
        with pytest.raises(DeadlineExceededError) as raised:
            client(base_url=proxy.url).modify_tool_call(created["tool_call_id"], {"parameters": {"to": "john.smith@gmail.com"}})
        assert raised.value.retry_after == 1
        assert proxy.stats["connections"] == 1, "it may have been carried out: the code decides, not the header"
    finally:
        proxy.close()


def test_a_confirm_answered_503_is_not_sent_again_and_carries_retry_after():
    gh = client()
    created = create(gh, session("503-confirm"))
    proxy = Proxy(lambda n: UNAVAILABLE if n == 0 else "forward")
    try:
        with pytest.raises(DatabaseUnavailableError) as raised:
            client(base_url=proxy.url).confirm_tool_call(created["tool_call_id"], wait=5)
        assert raised.value.retry_after == 1
        assert proxy.stats["connections"] == 1
        assert gh.get_tool_call(created["tool_call_id"])["status"] == "PENDING"
    finally:
        proxy.close()


def test_503s_past_the_attempts_or_a_long_retry_after_are_raised():
    proxy = Proxy(lambda n: UNAVAILABLE)
    try:
        with pytest.raises(DatabaseUnavailableError) as raised:
            client(base_url=proxy.url, max_attempts=2).list_tools()
        assert raised.value.retry_after == 1 and raised.value.status == 503
        assert proxy.stats["answered"] == 2
    finally:
        proxy.close()
    slow = Proxy(lambda n: raw_answer(503, "Service Unavailable", {"error": "later", "code": "database_unavailable"}, {"Retry-After": "120"}))
    try:
        with pytest.raises(DatabaseUnavailableError):
            client(base_url=slow.url).list_tools()
        assert slow.stats["answered"] == 1
    finally:
        slow.close()


def test_a_connection_refused_is_retried_even_for_confirm_then_reported_as_not_sent():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(GatehouseConnectionError) as raised:
        client(base_url=f"http://127.0.0.1:{port}", retry_backoff=0.01).confirm_tool_call("tc_0123456789ab")
    assert raised.value.maybe_sent is False


@pytest.mark.skipif(not 0 < BODY_READ_TIMEOUT <= 5, reason="needs --body-read-timeout of 5 s or less")
def test_a_create_whose_body_did_not_arrive_408_is_sent_again_with_the_same_key_and_makes_one_call():
    proxy = Proxy(lambda n: "stall" if n == 0 else "forward")
    try:
        session_id = session("408")
        created = create(client(base_url=proxy.url, retry_backoff=0.01), session_id)
        assert proxy.stats["stalled"] == 1 and proxy.stats["forwarded"] >= 1
        context = client().get_session_calls(session_id)
        assert context["pending_total"] == 1 and context["pending"][0]["tool_call_id"] == created["tool_call_id"]
    finally:
        proxy.close()


def _timeout_body() -> dict:
    return {"error": "The request's body did not arrive within 30 s.", "code": "request_timeout"}


NEVER_RETRIED = [
    ("create", raw_answer(429, "Too Many Requests", {"error": "This conversation already has 50 requests waiting.", "code": "too_many_open_calls"}),
     TooManyOpenCallsError, lambda gh: create(gh, session("429"))),
    ("confirm", raw_answer(409, "Conflict", {"error": "This call already reports to another callback URL.", "code": "callback_url_conflict",
                                             "status": "PENDING", "tool_call_id": "tc_0123456789ab"}),
     CallbackUrlConflictError, lambda gh: gh.confirm_tool_call("tc_0123456789ab", {"callback_url": "http://127.0.0.1:23000/elsewhere"})),
    ("modify", raw_answer(408, "Request Timeout", _timeout_body()), RequestTimeoutError,
     lambda gh: gh.modify_tool_call("tc_0123456789ab", {"parameters": {"to": "john.smith@gmail.com"}})),
    ("cancel", raw_answer(408, "Request Timeout", _timeout_body()), RequestTimeoutError, lambda gh: gh.cancel_tool_call("tc_0123456789ab")),
]


@pytest.mark.parametrize("what,answer,cls,send", NEVER_RETRIED, ids=[n[0] for n in NEVER_RETRIED])
def test_429_409_callback_url_conflict_and_a_408_on_a_request_that_is_not_idempotent_are_raised_at_once(what, answer, cls, send):
    proxy = Proxy(lambda n: answer)
    try:
        with pytest.raises(cls):
            send(client(base_url=proxy.url, retry_backoff=0.01))
        assert proxy.stats["answered"] == 1, f"{what}: sent once"
    finally:
        proxy.close()


def test_a_408_on_a_read_is_sent_again_then_raised():
    proxy = Proxy(lambda n: raw_answer(408, "Request Timeout", _timeout_body()))
    try:
        with pytest.raises(RequestTimeoutError):
            client(base_url=proxy.url, retry_backoff=0.01).list_tools()
        assert proxy.stats["answered"] == 3
    finally:
        proxy.close()
