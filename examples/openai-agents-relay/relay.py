"""An OpenAI Agents SDK (Python) realtime relay with Gatehouse as its tool backend, in text: each
line on stdin is what the caller says; what the agent says is printed, the checkpoint's question
and the outcome included when they arrive (docs/openai-realtime.md, "Python"). A voice relay
gives the same RealtimeSession its audio (``send_audio``) and plays its ``audio`` events; nothing
about Gatehouse changes.

    GATEHOUSE_URL=http://127.0.0.1:3000 GATEHOUSE_TOKEN=dev-token OPENAI_API_KEY=sk-... \\
        python relay.py --session call-42 < conversation.txt

OPENAI_REALTIME_URL points it at another server speaking the Realtime protocol. Each line is sent
``--pause`` seconds after the one before."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from agents.realtime import RealtimeAgent, RealtimeModelConfig, RealtimeRunner, RealtimeSession
from gatehouse_client import AsyncGatehouse
from gatehouse_openai_agents import GatehouseRealtime, assistant_text

INSTRUCTIONS = (
    "You are a phone assistant. Propose an action with its tool and read back what it answers; "
    "call confirm_call only after the caller says yes, change_call when they correct a detail."
)


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"{name} is not set")
    return value


async def events(session: RealtimeSession, tools: GatehouseRealtime) -> None:
    """The relay's event loop: every event to Gatehouse's tools, and each new line the agent says
    printed once."""
    printed = 0
    async for event in session:
        tools.handle(event)
        if event.type == "history_updated":
            said = assistant_text(event.history)
            for line in said[printed:]:
                print(f"agent: {line}", flush=True)
            printed = max(printed, len(said))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--session", required=True, help="the conversation: its calls are found again after a restart")
    parser.add_argument("--model", default=os.environ.get("OPENAI_REALTIME_MODEL", "gpt-realtime"))
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between the caller's lines")
    args = parser.parse_args()

    client = AsyncGatehouse(required("GATEHOUSE_URL"), required("GATEHOUSE_TOKEN"))
    tools = await GatehouseRealtime.attach(client, args.session)
    agent: RealtimeAgent[Any] = RealtimeAgent(name="assistant", instructions=INSTRUCTIONS, tools=list(tools.tools))
    config: RealtimeModelConfig = {"api_key": required("OPENAI_API_KEY"), "initial_model_settings": {"model_name": args.model, "modalities": ["text"]}}
    if os.environ.get("OPENAI_REALTIME_URL"):
        config["url"] = os.environ["OPENAI_REALTIME_URL"]
    session = await RealtimeRunner(agent).run(model_config=config)
    async with session:
        loop = asyncio.get_running_loop().create_task(events(session, tools))
        await tools.bind(session)
        reader = asyncio.StreamReader()
        await loop_connect(reader)
        while line := (await reader.readline()).decode():
            if not line.strip():
                continue
            print(f"caller: {line.strip()}", flush=True)
            await session.send_message(line.strip())
            await asyncio.sleep(args.pause)
        await tools.aclose()
        loop.cancel()
    await client.aclose()


async def loop_connect(reader: asyncio.StreamReader) -> None:
    """Reads stdin without blocking the event loop."""
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)


if __name__ == "__main__":
    asyncio.run(main())
