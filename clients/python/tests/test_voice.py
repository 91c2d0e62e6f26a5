"""gatehouse_client.voice against the running application: the functions a voice framework offers
its model, and the seed's conversation made of function calls as a model makes them, with a
barge-in (the same call made again), a relay restart between the proposal and the yes, and
Gatehouse unreachable."""

import asyncio
import json
import re
import socket
from typing import List

from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import CANCEL, CHANGE, CONFIRM, PENDING, UNREACHABLE, VoiceSession

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
