"""gatehouse_client.voice against the running application: the functions a voice framework offers
its model, and the seed's conversation made of function calls as a model makes them, with a
barge-in (the same call made again), a relay restart between the proposal and the yes, and
Gatehouse unreachable; a repeated yes that would skip the checkpoint's question, a Gatehouse that
hangs, and relays restarted at the checkpoint and while the call executes."""

import asyncio
import json
import re
import socket
from typing import List

import httpx

from gatehouse_client import AsyncGatehouse, InvalidStateError, NotFoundError
from gatehouse_client.voice import (
    ASKING, CANCEL, CHANGE, CONFIRM, FILLER, OVERTAKEN, PENDING, UNREACHABLE, UNSURE, VoiceSession,
)

from conftest import DEGRADED_URL, SEED_EMAIL, TOKEN, URL, session


class Spoken:
    """What the session said on its own, in order."""

    def __init__(self) -> None:
        self.said: List[str] = []

    async def __call__(self, sentence: str) -> None:
        self.said.append(sentence)

    async def saying(self, fragment: str, timeout: float = 20.0) -> str:
        """The first thing said that contains ``fragment`` (the checkpoint may be said again when
        the model proposes the same call while it waits there)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not any(fragment in sentence for sentence in self.said):
            assert loop.time() < deadline, f"{fragment!r} was not said within {timeout} s: {self.said}"
            await asyncio.sleep(0.05)
        return next(sentence for sentence in self.said if fragment in sentence)


def call_id(answer: str) -> str:
    found = re.search(r"Call id: (\S+?)\.\)", answer)
    assert found, answer
    return found.group(1)


def test_the_seed_conversation_as_function_calls_with_a_barge_in_and_a_restart() -> None:
    async def conversation() -> None:
        conversation_id = session("voice")
        spoken = Spoken()
        async with AsyncGatehouse(URL, TOKEN) as first:
            relay = VoiceSession(first, conversation_id, speak=spoken)
            functions = {f.name: f for f in await relay.functions()}
            assert {"send_email", CONFIRM, CHANGE, CANCEL, PENDING} <= set(functions)
            assert "to" in functions["send_email"].parameters["properties"], functions["send_email"]

            proposed = await relay.call("send_email", json.dumps(SEED_EMAIL), "fc_1")
            assert "john@gmail.com" in proposed
            # The caller barges in; the model makes the same function call again.
            again = await relay.call("send_email", SEED_EMAIL, "fc_1")
            assert call_id(again) == call_id(proposed)

            changed = await relay.call(CHANGE, {"changes": {"to": "john.smith@gmail.com"}, "reason": "the caller corrected it"}, "fc_2")
            assert "john.smith@gmail.com" in changed
            await relay.aclose()

        # The relay restarts: a new process, a new client, the same conversation.
        async with AsyncGatehouse(URL, TOKEN) as second:
            relay = VoiceSession(second, conversation_id, speak=spoken)
            waiting = await relay.call(PENDING, None, "fc_3")
            assert call_id(proposed) in waiting and "john.smith@gmail.com" in waiting

            await relay.call(CONFIRM, {}, "fc_4")
            # The caller interrupts while it runs, and the model proposes the corrected email again,
            # with a new call id: the same call.
            corrected = {**SEED_EMAIL, "to": "john.smith@gmail.com"}
            assert call_id(await relay.call("send_email", corrected, "fc_4b")) == call_id(proposed)
            checkpoint = await spoken.saying("is ready")
            assert "john.smith@gmail.com" in checkpoint, checkpoint
            await relay.call(CONFIRM, {}, "fc_5")  # go ahead, at the checkpoint
            completion = await spoken.saying("sent to")
            assert "john.smith@gmail.com" in completion, completion

            done = await second.get_tool_call(call_id(proposed))
            assert done["status"] == "COMPLETED"
            calls = await second.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and calls["recent_total"] == 1, "one email, one call"
            assert await relay.call(CONFIRM, {}, "fc_6") == "There is nothing waiting for the caller's yes."
            # Proposed once more after it was sent: answered with what was done, not sent twice.
            repeated = await relay.call("send_email", corrected, "fc_7")
            assert repeated.startswith("That was already done: ") and call_id(repeated) == call_id(proposed), repeated
            assert (await second.get_session_calls(conversation_id))["recent_total"] == 1
            await relay.aclose()

    asyncio.run(conversation())


def test_a_refusal_and_a_cancel_are_sentences_for_the_model() -> None:
    async def conversation() -> None:
        async with AsyncGatehouse(URL, TOKEN) as gh:
            relay = VoiceSession(gh, session("voice-no"))
            refused = await relay.call("send_email", {**SEED_EMAIL, "to": "not an address"}, "fc_1")
            assert refused.startswith("That can't be done as asked: to "), refused
            proposed = await relay.call("send_email", SEED_EMAIL, "fc_2")
            cancelled = await relay.call(CANCEL, {"tool_call_id": call_id(proposed), "reason": "changed their mind"}, "fc_3")
            assert (await gh.get_tool_call(call_id(proposed)))["status"] == "CANCELLED", cancelled
            assert await relay.call("send_email", "{not json", "fc_4") == "That request was malformed (the arguments are not JSON); nothing was done."

    asyncio.run(conversation())


def test_gatehouse_unreachable_is_said_and_nothing_is_done() -> None:
    async def conversation() -> None:
        # The application without its database: it answers 503, and writes nothing.
        async with AsyncGatehouse(DEGRADED_URL, TOKEN, max_attempts=1) as degraded:
            assert await VoiceSession(degraded, session("voice-down")).call("send_email", SEED_EMAIL, "fc_1") == UNREACHABLE
        # Nothing listening at all.
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
        conversation_id = session("voice-closed")
        async with AsyncGatehouse(closed, TOKEN, max_attempts=1) as nowhere:
            assert await VoiceSession(nowhere, conversation_id).call("send_email", SEED_EMAIL, "fc_1") == UNREACHABLE
        async with AsyncGatehouse(URL, TOKEN) as gh:
            calls = await gh.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and calls["recent_total"] == 0

    asyncio.run(conversation())


class SlowAnswers(httpx.AsyncBaseTransport):
    """Real requests to the real Gatehouse, whose answers to ``POST <path>...`` reach the relay
    ``delay`` seconds late (the first ``count`` of them)."""

    def __init__(self, path: str, delay: float, count: int = 1) -> None:
        self._inner = httpx.AsyncHTTPTransport()
        self._path, self._delay, self._left = path, delay, count

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.startswith(self._path) and self._left > 0:
            self._left -= 1
            await response.aread()
            await asyncio.sleep(self._delay)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def test_a_repeated_yes_over_a_slow_confirm_asks_the_checkpoint_question_before_anything_is_sent() -> None:
    async def conversation() -> None:
        conversation_id = session("voice-again")
        spoken = Spoken()
        slow = httpx.AsyncClient(transport=SlowAnswers("/voice-tools/confirm", 2.5))
        async with AsyncGatehouse(URL, TOKEN, http=slow) as gh:
            relay = VoiceSession(gh, conversation_id, speak=spoken)
            id = call_id(await relay.call("send_email", SEED_EMAIL, "fc_1"))
            # "Yes, send it": its answer is slow. The caller talks over the agent and says yes again.
            first_yes = asyncio.ensure_future(relay.call(CONFIRM, {}, "fc_2"))
            while (await gh.get_tool_call(id))["status"] != "PREPARED":
                await asyncio.sleep(0.05)
            assert await relay.call(CONFIRM, {}, "fc_3") == ASKING
            question = await spoken.saying("is ready")
            assert (await gh.get_tool_call(id))["status"] == "PREPARED", "nothing was sent on the second yes"
            # The first yes's answer comes back after the question: it is not to be spoken.
            assert await first_yes == OVERTAKEN
            # The caller answers the question: now it goes ahead, once.
            await relay.call(CONFIRM, {}, "fc_4")
            sent = await spoken.saying("sent to")
            assert spoken.said.index(question) < spoken.said.index(sent), spoken.said
            assert not any("check with you" in line for line in spoken.said), spoken.said
            calls = await gh.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and [c["status"] for c in calls["recent"]] == ["COMPLETED"], calls
            await relay.aclose()

    asyncio.run(conversation())


class Hanging:
    """A server that accepts connections and never answers: a Gatehouse that hangs."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"

    def close(self) -> None:
        self.server.close()


def test_a_hanging_gatehouse_gets_a_filler_and_a_true_line_within_the_deadline() -> None:
    async def conversation() -> None:
        hanging = Hanging()
        spoken = Spoken()
        try:
            async with AsyncGatehouse(hanging.url, TOKEN) as gh:
                relay = VoiceSession(gh, session("voice-hang"), speak=spoken, filler_after=0.3, deadline=1.5)
                loop = asyncio.get_running_loop()
                for name, arguments, expected in [
                    ("send_email", SEED_EMAIL, UNREACHABLE),
                    (PENDING, None, UNREACHABLE),
                    (CONFIRM, {}, UNSURE),
                    (CANCEL, {}, UNSURE),
                ]:
                    spoken.said.clear()
                    started = loop.time()
                    assert await relay.call(name, arguments, f"fc_{name}") == expected, name
                    waited = loop.time() - started
                    # The deadline bounds the wait (the client alone would wait 30 s and more); the
                    # slack is for a busy machine's event loop.
                    assert 1.5 <= waited < 4.5, (name, waited)
                    assert spoken.said == [FILLER], (name, spoken.said)
                await relay.aclose()
        finally:
            hanging.close()

    asyncio.run(conversation())


def test_a_restarted_relay_asks_the_waiting_question_and_speaks_an_outcome_once() -> None:
    async def conversation() -> None:
        conversation_id = session("voice-pickup")
        async with AsyncGatehouse(URL, TOKEN) as gh:
            # The first relay: proposed, confirmed, killed once the call waits at its checkpoint.
            first = Spoken()
            relay = VoiceSession(gh, conversation_id, speak=first)
            id = call_id(await relay.call("send_email", SEED_EMAIL, "fc_1"))
            await relay.call(CONFIRM, {}, "fc_2")
            await first.saying("is ready")
            await relay.aclose()

            # The second relay asks the question again (its caller's model never heard it), and a
            # yes before the question is spoken asks rather than sends.
            second = Spoken()
            relay = VoiceSession(gh, conversation_id, speak=second)
            assert id in await relay.pick_up()
            await second.saying("is ready")
            await relay.call(CONFIRM, {}, "fc_3")
            # Killed while it executes, before the outcome is spoken.
            await relay.aclose()
            while (await gh.get_tool_call(id))["status"] != "COMPLETED":
                await asyncio.sleep(0.05)

            # Two relays pick up the conversation at once: exactly one speaks the outcome.
            third, fourth = Spoken(), Spoken()
            relays = [VoiceSession(gh, conversation_id, speak=third), VoiceSession(gh, conversation_id, speak=fourth)]
            await asyncio.gather(*(r.pick_up() for r in relays))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while not (third.said or fourth.said):
                assert loop.time() < deadline, "no relay spoke the outcome"
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # room for a second, wrong, telling
            told = third.said + fourth.said
            assert len(told) == 1 and "sent to" in told[0], told
            for r in relays:
                await r.aclose()

            # Later relays say nothing of it again.
            fifth = Spoken()
            relay = VoiceSession(gh, conversation_id, speak=fifth)
            assert await relay.pick_up() == "Nothing is waiting."
            await asyncio.sleep(0.5)
            assert fifth.said == [], fifth.said
            await relay.aclose()

    asyncio.run(conversation())


def test_the_outcome_mark_is_one_relay_s_and_survives_its_own_retry() -> None:
    async def conversation() -> None:
        async with AsyncGatehouse(URL, TOKEN) as gh:
            proposed = await gh.create_tool_call({"session_id": session("voice-mark"), "function_name": "send_email", "parameters": SEED_EMAIL})
            id = proposed["tool_call_id"]
            try:
                await gh.mark_outcome_told(id)
                raise AssertionError("an open call has no outcome to tell")
            except InvalidStateError as refused:
                assert refused.call_status == "PENDING"
            await gh.cancel_tool_call(id)
            mine = await gh.mark_outcome_told(id, idempotency_key="relay-a")
            assert mine == {"tool_call_id": id, "status": "CANCELLED", "first": True}
            assert (await gh.mark_outcome_told(id, idempotency_key="relay-a"))["first"] is True, "its own retry"
            assert (await gh.mark_outcome_told(id, idempotency_key="relay-b"))["first"] is False
            assert (await gh.mark_outcome_told(id))["first"] is False
            try:
                await gh.mark_outcome_told("tc_000000000000")
                raise AssertionError("an unknown call")
            except NotFoundError:
                pass

    asyncio.run(conversation())
