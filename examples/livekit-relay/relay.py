"""A LiveKit Agents relay with Gatehouse as its tool backend, in text: each line on stdin is what
the caller says; what the agent says is printed, the checkpoint's question and the outcome
included when they arrive (docs/livekit.md). A voice agent gives the same AgentSession its STT,
TTS and room; nothing about Gatehouse changes.

    GATEHOUSE_URL=http://127.0.0.1:3000 GATEHOUSE_TOKEN=dev-token OPENAI_API_KEY=sk-... \\
        python relay.py --session call-42 < conversation.txt

OPENAI_BASE_URL points it at any server speaking the OpenAI protocol."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from gatehouse_client import AsyncGatehouse
from gatehouse_livekit import GatehouseTools
from livekit.agents import Agent, AgentSession, ConversationItemAddedEvent
from livekit.agents.llm import ChatMessage
from livekit.agents.types import NOT_GIVEN
from livekit.plugins import openai

INSTRUCTIONS = (
    "You are a phone assistant. Propose an action with its tool, read back what it answers, and "
    "call confirm_call only after the caller says yes; change_call when they correct a detail."
)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--session", required=True, help="the conversation's id: its calls are found again after a restart")
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4.1"))
    parser.add_argument("--pause", type=float, default=2.0, help="seconds to listen after each answer")
    args = parser.parse_args()

    async with AsyncGatehouse(os.environ["GATEHOUSE_URL"], os.environ["GATEHOUSE_TOKEN"]) as gatehouse:
        tools = await GatehouseTools.attach(gatehouse, args.session)
        llm = openai.LLM(
            model=args.model,
            api_key=os.environ.get("OPENAI_API_KEY", ""),
            base_url=os.environ.get("OPENAI_BASE_URL") or NOT_GIVEN,
        )
        session: AgentSession[Any] = AgentSession(llm=llm)

        def printed(event: ConversationItemAddedEvent) -> None:
            item = event.item
            if isinstance(item, ChatMessage) and item.role == "assistant" and item.text_content:
                print(f"agent: {item.text_content}", flush=True)

        session.on("conversation_item_added", printed)
        tools.speak_with(session)
        await session.start(Agent(instructions=INSTRUCTIONS, tools=tools.function_tools))
        for line in sys.stdin:
            if line.strip():
                print(f"caller: {line.strip()}", flush=True)
                await session.run(user_input=line.strip())
                await asyncio.sleep(args.pause)
        await tools.aclose()
        await session.aclose()


if __name__ == "__main__":
    asyncio.run(main())
