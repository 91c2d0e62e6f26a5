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

from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import UNREACHABLE
from gatehouse_livekit import GatehouseTools
from livekit.agents import Agent, AgentSession
from livekit.plugins import openai

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from scripted_model import SEED, ScriptedModel, play_example  # noqa: E402

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
