"""gatehouse-livekit in a real LiveKit Agents session: LiveKit's own AgentSession, Agent and
function-tool machinery, with its OpenAI plugin talking to a scripted model (a local server
speaking the OpenAI protocol), text only, against the running Gatehouse."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any, List

import httpx

from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import ASKED_SINCE, ASKING, FILLER, UNREACHABLE
from gatehouse_livekit import GatehouseTools
from livekit.agents import Agent, AgentSession
from livekit.plugins import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripted_model import (  # noqa: E402
    SEED, TURN_COST_STEPS, Hangs, ScriptedModel, SlowAnswers, direct_route_ms, play_example, report_turn_cost,
)

URL = os.environ["GATEHOUSE_URL"]
TOKEN = os.environ["GATEHOUSE_TOKEN"]
DEGRADED_URL = os.environ["GATEHOUSE_DEGRADED_URL"]
INSTRUCTIONS = "You are a phone assistant. Propose with a tool, and confirm only after the caller says yes."


def said(session: AgentSession[Any]) -> List[str]:
    """Everything the agent said, in order."""
    return [item.text_content or "" for item in session.history.items if getattr(item, "role", None) == "assistant"]


async def until_said(session: AgentSession[Any], fragment: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not any(fragment in line for line in said(session)):
        assert loop.time() < deadline, f"the agent never said {fragment!r}: {said(session)}"
        await asyncio.sleep(0.05)


def model_llm(model: ScriptedModel) -> openai.LLM:
    return openai.LLM(model="scripted", base_url=model.base_url, api_key="scripted")


def test_the_seed_conversation_with_a_restart_before_the_yes() -> None:
    async def conversation() -> None:
        conversation_id = f"livekit-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([
            [("send_email", SEED)], "I'll email john@gmail.com about the meeting. Shall I?",
            [("change_call", {"changes": {"to": "john.smith@gmail.com"}})], "Got it: john.smith@gmail.com. Shall I?",
        ])
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            tools = await GatehouseTools.attach(gatehouse, conversation_id)
            async with AgentSession(llm=model_llm(model)) as session:
                tools.speak_with(session)
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                proposed = await session.run(user_input="Email John about tomorrow's meeting.")
                proposed.expect.next_event().is_function_call(name="send_email")
                output = proposed.expect.next_event().is_function_call_output()
                assert "john@gmail.com" in output.event().item.output
                proposed.expect.next_event().is_message(role="assistant")
                changed = await session.run(user_input="Actually it's john.smith@gmail.com.")
                changed.expect.next_event().is_function_call(name="change_call")
                assert "john.smith@gmail.com" in changed.expect.next_event().is_function_call_output().event().item.output
            await tools.aclose()

        # The relay restarts: a new session, agent and client on the same conversation.
        model.script.extend([[("confirm_call", {})], "On it.", [("confirm_call", {})], "Going ahead."])
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            tools = await GatehouseTools.attach(gatehouse, conversation_id)
            async with AgentSession(llm=model_llm(model)) as session:
                tools.speak_with(session)
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                await session.run(user_input="Yes, send it.")
                await until_said(session, "is ready")  # the checkpoint's question
                await session.run(user_input="Go ahead.")
                await until_said(session, "sent to john.smith@gmail.com")
            await tools.aclose()
            calls = await gatehouse.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and calls["recent_total"] == 1, calls
            assert calls["recent"][0]["status"] == "COMPLETED"
        model.close()

    asyncio.run(conversation())


def test_the_tool_called_again_after_an_interruption_is_the_same_call() -> None:
    async def conversation() -> None:
        conversation_id = f"livekit-again-{uuid.uuid4().hex[:12]}"
        # LiveKit loses a tool's result to an interruption and its model calls the tool again,
        # with a new call id (livekit/agents#3702).
        model = ScriptedModel([
            [("send_email", SEED)], "I'll email John. Shall I?",
            [("send_email", SEED)], "I'll email John. Shall I?",
            [("confirm_call", {})], "On it.", [("confirm_call", {})], "Going ahead.",
        ])
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            tools = await GatehouseTools.attach(gatehouse, conversation_id)
            async with AgentSession(llm=model_llm(model)) as session:
                tools.speak_with(session)
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                await session.run(user_input="Email John.")
                session.interrupt()
                await session.run(user_input="Sorry, what did you say?")
                waiting = await gatehouse.get_session_calls(conversation_id)
                assert waiting["pending_total"] == 1, waiting
                await session.run(user_input="Yes.")
                await until_said(session, "is ready")
                await session.run(user_input="Go ahead.")
                await until_said(session, "sent to john@gmail.com")
            await tools.aclose()
            calls = await gatehouse.get_session_calls(conversation_id)
            assert calls["recent_total"] == 1 and calls["recent"][0]["status"] == "COMPLETED", "one email"
        model.close()

    asyncio.run(conversation())


def outputs(session: AgentSession[Any]) -> List[str]:
    """Every function result the model was given, in order."""
    return [str(getattr(item, "output", "")) for item in session.history.items if getattr(item, "type", None) == "function_call_output"]


def test_a_repeated_yes_over_a_slow_confirm_asks_the_checkpoint_question_before_anything_is_sent() -> None:
    async def conversation() -> None:
        conversation_id = f"livekit-yes-{uuid.uuid4().hex[:12]}"
        # Turns in the order the session asks for them: the second yes is answered while the first
        # yes's tool is out, its answer (the question is being asked), the go-ahead once the question
        # was said, its answer, and the first yes's late answer.
        model = ScriptedModel([[("confirm_call", {})], [("confirm_call", {})], "Let me check.",
                               [("confirm_call", {})], "Sending it.", "Okay.", "Sent."])
        async with AsyncGatehouse(URL, TOKEN) as plain:
            await plain.create_tool_call({"session_id": conversation_id, "function_name": "send_email", "parameters": SEED})
        async with AsyncGatehouse(URL, TOKEN, http=httpx.AsyncClient(transport=SlowAnswers("/voice-tools/confirm", 2.5, count=1))) as gatehouse:
            tools = await GatehouseTools.attach(gatehouse, conversation_id)
            async with AgentSession(llm=model_llm(model)) as session:
                tools.speak_with(session)
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                first_yes = asyncio.ensure_future(session.run(user_input="Yes, send it."))
                await asyncio.sleep(1.2)
                # The caller talks over the agent while the first yes is out, and says yes again.
                session.interrupt()
                await session.generate_reply(user_input="Did you send it? Yes, send it.")
                await until_said(session, "is ready")  # the question, before anything is sent
                assert (await gatehouse.get_session_calls(conversation_id))["pending"][0]["status"] == "PREPARED"
                # The caller answers the question (within checkpoint_ttl_seconds, 4 s in clients/test).
                await session.generate_reply(user_input="Yes, go ahead.")
                await until_said(session, "sent to john@gmail.com")
                await first_yes
                lines = said(session)
                assert min(i for i, l in enumerate(lines) if "is ready" in l) < min(i for i, l in enumerate(lines) if "sent to" in l), lines
                # The second yes was not taken: the question was being asked, or (had LiveKit run it
                # after the question was said) it was said before the question.
                assert ASKING in outputs(session) or ASKED_SINCE in outputs(session), outputs(session)
                # Nothing given to the model after the question claims a step the call had passed.
                texts = [str(getattr(item, "output", None) or getattr(item, "text_content", None) or "") for item in session.history.items]
                asked = min(i for i, text in enumerate(texts) if "is ready" in text)
                assert not any("check with you" in text for text in texts[asked:]), texts
            await tools.aclose()
            calls = await gatehouse.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and [c["status"] for c in calls["recent"]] == ["COMPLETED"], calls
        model.close()

    asyncio.run(conversation())


def test_a_hanging_gatehouse_gets_a_filler_and_a_true_line_within_the_deadline() -> None:
    async def conversation() -> None:
        conversation_id = f"livekit-hang-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([[("send_email", SEED)], "I can't reach it right now."])
        async with AsyncGatehouse(URL, TOKEN, http=httpx.AsyncClient(transport=Hangs())) as gatehouse:
            tools = await GatehouseTools.attach(gatehouse, conversation_id, deadline=1.5, filler_after=0.3)
            async with AgentSession(llm=model_llm(model)) as session:
                tools.speak_with(session)
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                loop = asyncio.get_running_loop()
                started = loop.time()
                result = await session.run(user_input="Email John.")
                # The deadline bounds the turn (the client alone would wait 30 s and more); the
                # slack is for a busy machine.
                assert loop.time() - started < 5.0
                result.expect.next_event().is_function_call(name="send_email")
                assert result.expect.contains_function_call_output().event().item.output == UNREACHABLE
                await until_said(session, FILLER)
            await tools.aclose()
        model.close()

    asyncio.run(conversation())


def test_a_restarted_relay_asks_the_waiting_question_and_speaks_an_outcome_once() -> None:
    async def conversation() -> None:
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            at_checkpoint = f"livekit-pick-{uuid.uuid4().hex[:12]}"
            waiting = await gatehouse.create_tool_call({"session_id": at_checkpoint, "function_name": "send_email", "parameters": SEED})
            assert (await gatehouse.confirm_tool_call(waiting["tool_call_id"], wait=10))["status"] == "PREPARED"
            model = ScriptedModel([[("confirm_call", {})], "Sending it."])
            tools = await GatehouseTools.attach(gatehouse, at_checkpoint)
            async with AgentSession(llm=model_llm(model)) as session:
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                await tools.pick_up(session)
                await until_said(session, "is ready")
                await session.run(user_input="Yes, send it.")
                await until_said(session, "sent to john@gmail.com")
            await tools.aclose()
            model.close()

            finished = f"livekit-done-{uuid.uuid4().hex[:12]}"
            done = await gatehouse.create_tool_call({"session_id": finished, "function_name": "send_email", "parameters": SEED})
            await gatehouse.confirm_tool_call(done["tool_call_id"], wait=10)
            assert (await gatehouse.resume_execution(done["tool_call_id"], {"action": "proceed"}, wait=10))["status"] == "COMPLETED"
            spoken: List[str] = []
            for _ in range(2):
                model = ScriptedModel([])
                tools = await GatehouseTools.attach(gatehouse, finished)
                async with AgentSession(llm=model_llm(model)) as session:
                    await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                    await tools.pick_up(session)
                    await asyncio.sleep(1.5)
                    spoken += [line for line in said(session) if "sent to" in line]
                await tools.aclose()
                model.close()
            assert len(spoken) == 1, spoken

    asyncio.run(conversation())


def test_what_gatehouse_costs_a_turn() -> None:
    """Measured, not asserted: from each function call (the proposal, the yes, the go-ahead) to its
    output in LiveKit's session (the items' own times), over several conversations, beside
    Gatehouse's own routes (docs/benchmarks.md, "What Gatehouse costs a turn"). What is asserted
    is that each conversation sent its email."""

    async def conversations(count: int) -> None:
        measured: dict[str, list[float]] = {step: [] for step in TURN_COST_STEPS}
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            for n in range(count):
                conversation_id = f"livekit-cost-{n}-{uuid.uuid4().hex[:8]}"
                model = ScriptedModel([[("send_email", SEED)], "Shall I?", [("confirm_call", {})], "On it.",
                                       [("confirm_call", {})], "Sending it."])
                tools = await GatehouseTools.attach(gatehouse, conversation_id)
                async with AgentSession(llm=model_llm(model)) as session:
                    tools.speak_with(session)
                    await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                    await session.run(user_input="Email John.")
                    await session.run(user_input="Yes.")
                    await until_said(session, "is ready")
                    await session.run(user_input="Go ahead.")
                    await until_said(session, "sent to")
                    items = session.history.items
                    made = {i.call_id: i.created_at for i in items if getattr(i, "type", None) == "function_call"}
                    answered = [(i.call_id, i.created_at) for i in items if getattr(i, "type", None) == "function_call_output"]
                    assert len(answered) == 3, items
                    for step, (call_id, at) in zip(TURN_COST_STEPS, answered):
                        measured[step].append((at - made[call_id]) * 1000)
                await tools.aclose()
                model.close()
                calls = await gatehouse.get_session_calls(conversation_id)
                assert [c["status"] for c in calls["recent"]] == ["COMPLETED"], calls
            report_turn_cost("livekit", measured, await direct_route_ms(gatehouse, count))

    asyncio.run(conversations(8))


def test_gatehouse_unavailable_is_said_and_nothing_is_done() -> None:
    async def conversation() -> None:
        conversation_id = f"livekit-down-{uuid.uuid4().hex[:12]}"
        model = ScriptedModel([[("send_email", SEED)], "I can't do that right now."])
        async with AsyncGatehouse(DEGRADED_URL, TOKEN, max_attempts=1) as degraded:
            tools = await GatehouseTools.attach(degraded, conversation_id)
            async with AgentSession(llm=model_llm(model)) as session:
                await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
                result = await session.run(user_input="Email John.")
                result.expect.next_event().is_function_call(name="send_email")
                assert result.expect.next_event().is_function_call_output().event().item.output == UNREACHABLE
        async with AsyncGatehouse(URL, TOKEN) as gatehouse:
            calls = await gatehouse.get_session_calls(conversation_id)
            assert calls["pending_total"] == 0 and calls["recent_total"] == 0
        model.close()

    asyncio.run(conversation())


def test_the_example_relay_plays_the_seed_conversation() -> None:
    said = play_example("livekit", f"livekit-example-{uuid.uuid4().hex[:12]}")
    assert any("john.smith@gmail.com" in line and "ready" in line for line in said), said
    assert any("sent to john.smith@gmail.com" in line.lower() for line in said), said
