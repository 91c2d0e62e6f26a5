"""Gatehouse as the tool backend of a LiveKit Agents session (docs/livekit.md).

``tools = await GatehouseTools.attach(client, session_id)`` reads the tools Gatehouse lists and
makes each one, and the conversation's confirm, change, cancel and pending functions, a LiveKit
function tool (``tools.function_tools``, for the ``Agent``); ``tools.speak_with(session)`` lets
the checkpoint's question and the outcome be said by the ``AgentSession`` when they arrive.
What each function does is ``gatehouse_client.voice``'s: a proposal is held as PENDING until the
caller says yes, a correction changes it, and the same action proposed again after an
interruption (LiveKit's model calls the tool again when its result was lost) is the same call,
never a second one."""

from __future__ import annotations

from typing import Any, Dict, List

from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import Function, VoiceSession
from livekit.agents import AgentSession, RunContext, function_tool
from livekit.agents.llm import RawFunctionTool, Tool, Toolset

__all__ = ["GatehouseTools"]


class GatehouseTools:
    """Gatehouse's tools for one conversation's agent."""

    def __init__(self, voice: VoiceSession, functions: List[Function]) -> None:
        self.voice = voice
        self.functions = functions
        # Typed as Agent(tools=...) takes them.
        self.function_tools: List[Tool | Toolset] = [self._tool(function) for function in functions]

    @classmethod
    async def attach(cls, client: AsyncGatehouse, session_id: str) -> "GatehouseTools":
        """The conversation's tools. ``session_id`` is the conversation's: the same after a relay
        restart, so its waiting calls are found again."""
        voice = VoiceSession(client, session_id)
        return cls(voice, await voice.functions())

    def speak_with(self, session: AgentSession[Any]) -> None:
        """What arrives later is said by ``session`` (and added to its chat context)."""

        async def speak(sentence: str) -> None:
            await session.say(sentence, add_to_chat_ctx=True)

        self.voice.speak = speak

    async def aclose(self) -> None:
        """Stops following the conversation's calls (they go on in Gatehouse)."""
        await self.voice.aclose()

    def _tool(self, function: Function) -> RawFunctionTool[Any, Any]:
        voice = self.voice

        async def handle(raw_arguments: Dict[str, Any], context: RunContext[Any]) -> str:
            return await voice.call(function.name, raw_arguments, context.function_call.call_id)

        schema = {"name": function.name, "description": function.description, "parameters": function.parameters}
        return function_tool(handle, raw_schema=schema)
