"""gatehouse-openai-agents in the ``openai-agents`` package's own RealtimeRunner, RealtimeAgent,
RealtimeSession and WebSocket model, talking to a scripted model (integrations/scripted_realtime.py,
a local server speaking the Realtime protocol), against the running Gatehouse. The same tests as
the JavaScript integration's (integrations/openai-realtime/test/realtime.test.mjs)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable, Dict, List, Optional, TypeVar

import httpx
from agents.realtime import RealtimeAgent, RealtimeRunner, RealtimeSession
from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import ASKING, OVERTAKEN, UNREACHABLE
from gatehouse_openai_agents import GatehouseRealtime, assistant_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripted_model import SEED, TURN_COST_STEPS, Hangs, SlowAnswers, report_turn_cost  # noqa: E402
from scripted_realtime import ScriptedRealtime, Turn  # noqa: E402

URL = os.environ["GATEHOUSE_URL"]
TOKEN = os.environ["GATEHOUSE_TOKEN"]
DEGRADED_URL = os.environ["GATEHOUSE_DEGRADED_URL"]
INSTRUCTIONS = "You are a phone assistant. Propose with a tool, and confirm only after the caller says yes."

T = TypeVar("T")


def conversation(name: str) -> str:
    return f"agents-{name}-{uuid.uuid4().hex[:12]}"


def gatehouse(transport: Optional[httpx.AsyncBaseTransport] = None, url: str = URL, **options: Any) -> AsyncGatehouse:
    http = httpx.AsyncClient(transport=transport) if transport is not None else None
    return AsyncGatehouse(url, TOKEN, http=http, **options)


class Relay:
    """A relay: the SDK's session on its WebSocket model, to the scripted model, with the
    relay's event loop handing every event to the package."""

    def __init__(self, tools: GatehouseRealtime, session: RealtimeSession) -> None:
        self.tools, self.session = tools, session
        self.history: List[Any] = []
        self.interruptions = 0
        self.approval_requests: List[str] = []
        self._loop = asyncio.get_running_loop().create_task(self._events())

    async def _events(self) -> None:
        async for event in self.session:
            self.tools.handle(event)
            if event.type in ("history_updated",):
                self.history = list(event.history)
            elif event.type == "history_added":
                self.history = [item for item in self.history if item.item_id != event.item.item_id] + [event.item]
            elif event.type == "audio_interrupted":
                self.interruptions += 1
            elif event.type == "tool_approval_required":
                self.approval_requests.append(event.call_id)

    def said(self) -> List[str]:
        return assistant_text(self.history)

    async def close(self) -> None:
        await self.tools.aclose()
        await self.session.close()
        self._loop.cancel()
        await asyncio.gather(self._loop, return_exceptions=True)


async def relay(model: ScriptedRealtime, client: AsyncGatehouse, conversation_id: str, **options: Any) -> Relay:
    tools = await GatehouseRealtime.attach(client, conversation_id, **options)
    agent: RealtimeAgent[Any] = RealtimeAgent(name="assistant", instructions=INSTRUCTIONS, tools=list(tools.tools))
    runner = RealtimeRunner(agent)
    session = await runner.run(model_config={"url": model.url, "api_key": "scripted", "initial_model_settings": {"modalities": ["text"]}})
    await session.enter()
    played = Relay(tools, session)
    await tools.bind(session)
    return played


async def until(what: str, check: Callable[[], Awaitable[Optional[T]]], seconds: float = 15.0) -> T:
    deadline = time.monotonic() + seconds
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def now(value: T) -> Callable[[], Awaitable[T]]:
    async def check() -> T:
        return value

    return check


async def said_something(r: Relay, fragment: str) -> None:
    async def heard() -> bool:
        return any(fragment in line for line in r.said())

    await until(f'the agent to say "{fragment}"', heard)


async def settled(client: AsyncGatehouse, conversation_id: str) -> Dict[str, Any]:
    async def done() -> Optional[Dict[str, Any]]:
        calls = await client.get_session_calls(conversation_id)
        return dict(calls) if calls["pending_total"] == 0 and calls["recent_total"] > 0 else None

    return await until("the conversation's calls to settle", done)


async def status_of(client: AsyncGatehouse, tool_call_id: str) -> str:
    return str((await client.get_tool_call(tool_call_id))["status"])


def play(body: Callable[[ScriptedRealtime, AsyncGatehouse], Awaitable[None]], script: List[Turn]) -> None:
    async def run() -> None:
        model = await ScriptedRealtime(script).start()
        client = gatehouse()
        try:
            await body(model, client)
        finally:
            await model.close()
            await client.aclose()

    asyncio.run(run())


def test_the_seed_conversation_with_a_relay_restart_between_the_proposal_and_the_yes() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("seed")
        first = await relay(model, client, id)
        await first.session.send_message("Email John about tomorrow's meeting.")
        await said_something(first, "john@gmail.com")  # the read-back, spoken while the approval waits
        assert len(first.tools.pending_approvals) == 1
        await first.session.send_message("Actually it's john.smith@gmail.com.")
        await said_something(first, "Got it: john.smith@gmail.com")
        assert "john.smith@gmail.com" in model.outputs()[-1]["output"]
        await first.close()

        # The relay restarts: a new client, agent, session and connection on the same conversation.
        model.script += [[("confirm_call", {})], "On it.", [("confirm_call", {})], "Going ahead."]
        second = await relay(model, gatehouse(), id)
        assert second.tools.pending_approvals == []
        assert len(second.tools.restored_calls) == 1
        waiting = second.tools.restored_calls[0]

        async def put_into_conversation() -> bool:
            return any(e["type"] == "conversation.item.create" and e["item"]["type"] == "message" and waiting in str(e["item"]) for e in model.received)

        await until("the waiting call to be put into the new conversation", put_into_conversation)
        await second.session.send_message("Yes, send it.")
        await said_something(second, "is ready")  # the checkpoint's question
        await second.session.send_message("Go ahead.")
        await said_something(second, "sent to john.smith@gmail.com")
        calls = await settled(client, id)
        assert calls["recent_total"] == 1
        assert calls["recent"][0]["status"] == "COMPLETED"
        assert calls["recent"][0]["parameters"]["to"] == "john.smith@gmail.com"
        await second.close()

    play(body, [
        [("send_email", SEED)],
        [("change_call", {"changes": {"to": "john.smith@gmail.com"}})],
        "Got it: john.smith@gmail.com. Shall I send it?",
    ])


def test_a_barge_in_and_the_same_call_made_again_before_and_after_the_yes_sends_one_email() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("again")
        r = await relay(model, client, id)
        await r.session.send_message("Email John.")
        await said_something(r, "john@gmail.com")
        await model.barge_in()
        await until("the SDK to take the barge-in", lambda: now(r.interruptions == 1)())
        await r.session.send_message("Sorry, what did you say?")
        await said_something(r, "Shall I?")
        assert "already waiting" in model.outputs()[-1]["output"]
        assert (await client.get_session_calls(id))["pending_total"] == 1, "one call waits, not two"
        await r.session.send_message("Yes.")
        await said_something(r, "On it.")
        await model.barge_in()
        await until("the SDK to take the second barge-in", lambda: now(r.interruptions == 2)())
        await r.session.send_message("Hello? Did it work?")
        await said_something(r, "already on its way")
        assert any("already under way" in o["output"] for o in model.outputs())
        await said_something(r, "is ready")
        await r.session.send_message("Go ahead.")
        await said_something(r, "sent to john@gmail.com")
        calls = await settled(client, id)
        assert calls["recent_total"] == 1, "one email"
        assert calls["recent"][0]["status"] == "COMPLETED"
        await r.close()

    play(body, [
        [("send_email", SEED)],
        [("send_email", SEED)],  # the caller talked over the read-back; the model proposes again
        "I'll email John about the meeting. Shall I?",
        [("confirm_call", {})],
        "On it.",
        [("send_email", SEED)],  # interrupted while it runs; the model tries once more
        "It is already on its way.",
        [("confirm_call", {})],
        "Going ahead.",
    ])


def test_the_applications_approve_confirms_the_held_call_and_reject_cancels_it() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("decide")
        r = await relay(model, client, id)
        await r.session.send_message("Email John.")
        proposed = await until("the proposal to be held", lambda: now(r.tools.pending_approvals[0] if r.tools.pending_approvals else None)())
        await r.session.approve_tool_call(proposed.call_id)

        async def left_pending() -> bool:
            return await status_of(client, proposed.tool_call_id) != "PENDING"

        await until("the approved call to leave PENDING", left_pending)
        await r.session.send_message("And one about lunch.")

        def second() -> Any:
            return next((held for held in r.tools.pending_approvals if held.tool_call_id != proposed.tool_call_id), None)

        lunch = await until("the second proposal to be held", lambda: now(second())())
        await r.session.reject_tool_call(lunch.call_id)

        async def cancelled() -> bool:
            return await status_of(client, lunch.tool_call_id) == "CANCELLED"

        await until("the rejected call to be cancelled", cancelled)
        await r.close()

    play(body, [[("send_email", SEED)], "Sent, as you approved.", [("send_email", {**SEED, "subject": "Lunch"})], "Not sent."])


def test_gatehouse_unavailable_the_model_is_told_so_and_nothing_is_half_done() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("down")
        degraded = gatehouse(url=DEGRADED_URL, max_attempts=1)
        r = await relay(model, degraded, id)
        await r.session.send_message("Email John.")
        await said_something(r, "I can't do that right now.")
        assert model.outputs()[-1]["output"] == UNREACHABLE
        assert r.tools.pending_approvals == []
        calls = await client.get_session_calls(id)
        assert calls["pending_total"] + calls["recent_total"] == 0
        await r.close()
        await degraded.aclose()

    play(body, [[("send_email", SEED)], "I can't do that right now."])


def test_a_repeated_yes_over_a_slow_confirm_asks_the_checkpoint_question_before_anything_is_sent() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("yes-again")
        proposed = await client.create_tool_call({"session_id": id, "function_name": "send_email", "parameters": SEED})
        call = proposed["tool_call_id"]
        slow = gatehouse(SlowAnswers("/voice-tools/confirm", 2.5, count=1))
        r = await relay(model, slow, id)
        await r.session.send_message("Yes, send it.")

        async def prepared() -> bool:
            return await status_of(client, call) == "PREPARED"

        await until("the call to wait at its checkpoint", prepared)
        await r.session.send_message("Did you send it? Yes, send it.")
        await said_something(r, "is ready")  # the question, before anything is sent
        assert await status_of(client, call) == "PREPARED"
        await until("the second yes's answer", lambda: now(any(o["output"] == ASKING for o in model.outputs()))())
        await until("the first yes's late answer", lambda: now(any(o["output"] == OVERTAKEN for o in model.outputs()))())
        await r.session.send_message("Yes, go ahead.")
        await said_something(r, "sent to john@gmail.com")
        lines = r.said()
        asked = next(i for i, line in enumerate(lines) if "is ready" in line)
        sent = next(i for i, line in enumerate(lines) if "sent to" in line)
        assert asked < sent, lines
        assert not any("check with you" in line for line in lines + [o["output"] for o in model.outputs()]), lines
        calls = await settled(client, id)
        assert [c["status"] for c in calls["recent"]] == ["COMPLETED"]
        await r.close()
        await slow.aclose()

    # Turns in the order the session asks for responses: the two yeses, the answer to the second
    # (the question is being asked), the answer to the first (overtaken), the go-ahead, its answer.
    play(body, [[("confirm_call", {})], [("confirm_call", {})], "Let me check.", "Okay.", [("confirm_call", {})], "Sent."])


def test_a_hanging_gatehouse_the_model_gets_a_true_line_within_the_deadline() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("hang")
        hanging = gatehouse(Hangs())
        r = await relay(model, hanging, id, deadline=1.5)
        started = time.monotonic()
        await r.session.send_message("Email John.")
        await said_something(r, "I can't reach it right now.")
        # The deadline bounds the wait (the client alone would wait 30 s and more); the slack is
        # for a busy machine.
        assert time.monotonic() - started < 5.0, time.monotonic() - started
        assert model.outputs()[-1]["output"] == UNREACHABLE
        await r.session.send_message("Is anything waiting?")
        await said_something(r, "Still nothing.")
        assert model.outputs()[-1]["output"] == UNREACHABLE
        await r.close()

    play(body, [[("send_email", SEED)], "I can't reach it right now.", [("pending_calls", {})], "Still nothing."])


def test_a_restarted_relay_asks_the_waiting_question_and_an_outcome_is_spoken_once_across_relays() -> None:
    async def body(model: ScriptedRealtime, client: AsyncGatehouse) -> None:
        id = conversation("pickup")
        waiting = await client.create_tool_call({"session_id": id, "function_name": "send_email", "parameters": SEED})
        assert (await client.confirm_tool_call(waiting["tool_call_id"], {}, wait=10))["status"] == "PREPARED"
        r = await relay(model, client, id)
        await said_something(r, "is ready")  # asked again by the new relay
        await r.session.send_message("Yes, send it.")
        await said_something(r, "sent to john@gmail.com")
        await r.close()

        finished = conversation("finished")
        done = await client.create_tool_call({"session_id": finished, "function_name": "send_email", "parameters": SEED})
        await client.confirm_tool_call(done["tool_call_id"], {}, wait=10)
        assert (await client.resume_execution(done["tool_call_id"], {"action": "proceed"}, wait=10))["status"] == "COMPLETED"
        told = 0
        for _ in range(2):
            quiet = await ScriptedRealtime([]).start()
            again = await relay(quiet, client, finished)
            await asyncio.sleep(1.5)
            told += sum("sent to" in line for line in again.said())
            await again.close()
            await quiet.close()
        assert told == 1

    play(body, [[("confirm_call", {})], "Sending it."])


def test_what_gatehouse_costs_a_turn_measured_not_asserted() -> None:
    # From each function call (the proposal, the yes, the go-ahead) to what the relay sends for it
    # (the read-back spoken, the yes's output, the go-ahead's output), over several conversations,
    # beside Gatehouse's own routes (docs/benchmarks.md, "What Gatehouse costs a turn"). What is
    # asserted is that each conversation sent its email.
    from scripted_model import direct_route_ms

    async def run() -> None:
        steps: Dict[str, List[float]] = {step: [] for step in TURN_COST_STEPS}
        client = gatehouse()
        for n in range(8):
            model = await ScriptedRealtime([[("send_email", SEED)], [("confirm_call", {})], "On it.", [("confirm_call", {})], "Sending it."]).start()
            id = conversation(f"cost-{n}")
            r = await relay(model, client, id)
            await r.session.send_message("Email John.")
            await said_something(r, "john@gmail.com")
            await r.session.send_message("Yes.")
            await said_something(r, "is ready")
            await r.session.send_message("Go ahead.")
            await said_something(r, "sent to")
            (proposal, proposed_at), (yes, yes_at), (go_ahead, go_ahead_at) = list(model.called_at.items())
            spoken = next(e for e in model.received if e["type"] == "response.create" and (e.get("response") or {}).get("instructions") and e["received_at"] > proposed_at)

            def output_for(call_id: str) -> Dict[str, Any]:
                return next(e for e in model.received if e["type"] == "conversation.item.create" and e["item"].get("call_id") == call_id)

            steps["propose"].append((spoken["received_at"] - proposed_at) * 1000)
            steps["confirm"].append((output_for(yes)["received_at"] - yes_at) * 1000)
            steps["proceed"].append((output_for(go_ahead)["received_at"] - go_ahead_at) * 1000)
            calls = await settled(client, id)
            assert [c["status"] for c in calls["recent"]] == ["COMPLETED"]
            await r.close()
            await model.close()
        direct = await direct_route_ms(client, 8)
        await client.aclose()
        print(report_turn_cost("openai-agents", steps, direct))

    asyncio.run(run())


def test_the_example_relay_plays_the_seed_conversation() -> None:
    async def run() -> List[str]:
        model = await ScriptedRealtime([
            [("send_email", SEED)],
            [("change_call", {"changes": {"to": "john.smith@gmail.com"}})],
            "Got it: john.smith@gmail.com. Shall I send it?",
            [("confirm_call", {})],
            "On it.",
            [("confirm_call", {})],
            "Going ahead.",
        ]).start()
        relay_py = Path(__file__).resolve().parents[3] / "examples" / "openai-agents-relay" / "relay.py"
        environment = {**os.environ, "OPENAI_REALTIME_URL": model.url, "OPENAI_API_KEY": "scripted"}
        process = await asyncio.create_subprocess_exec(
            sys.executable, str(relay_py), "--session", conversation("example"), "--pause", "1.5",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment,
        )
        lines = "Email John about tomorrow's meeting.\nActually it's john.smith@gmail.com.\nYes, send it.\nGo ahead.\n"
        try:
            out, err = await asyncio.wait_for(process.communicate(lines.encode()), 120)
        finally:
            await model.close()
        assert process.returncode == 0, err.decode()[-3000:]
        return [line[len("agent: "):] for line in out.decode().splitlines() if line.startswith("agent: ")]

    said = asyncio.run(run())
    assert any("john@gmail.com" in line for line in said), said
    assert any("is ready" in line for line in said), said
    assert any("sent to john.smith@gmail.com" in line for line in said), said
