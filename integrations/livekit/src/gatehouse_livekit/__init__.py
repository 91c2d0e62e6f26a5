"""Gatehouse as the tool backend of a LiveKit Agents session (docs/livekit.md).

``tools = await GatehouseTools.attach(client, session_id)`` reads the tools Gatehouse lists and
makes each one, and the conversation's confirm, change, cancel and pending functions, a LiveKit
function tool (``tools.function_tools``, for the ``Agent``); ``tools.speak_with(session)`` lets
the checkpoint's question and the outcome be said by the ``AgentSession`` when they arrive.
What each function does is ``gatehouse_client.voice``'s: a proposal is held as PENDING until the
caller says yes, a correction changes it, and the same action proposed again after an
interruption (LiveKit's model calls the tool again when its result was lost) is the same call,
never a second one.

Once the session has started, ``await tools.pick_up(session)`` picks the conversation up
(``VoiceSession.pick_up``): what is waiting goes into the agent's chat context, the question of a
call waiting at its checkpoint is asked, and the outcome of a call that settled while no relay was
there is said, once across relays."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

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
    async def attach(
        cls, client: AsyncGatehouse, session_id: str, *, deadline: float = 4.0, filler_after: Optional[float] = 0.8
    ) -> "GatehouseTools":
        """The conversation's tools. ``session_id`` is the conversation's: the same after a relay
        restart, so its waiting calls are found again. ``deadline`` and ``filler_after`` are the
        voice session's (seconds): when the model gets a true sentence whatever Gatehouse does, and
        when a filler line is said meanwhile. Raises the client's error if Gatehouse's tool list
        cannot be read (docs/livekit.md, "When Gatehouse is down")."""
        voice = VoiceSession(client, session_id, deadline=deadline, filler_after=filler_after)
        return cls(voice, await voice.functions())

    def speak_with(self, session: AgentSession[Any]) -> None:
        """What arrives later is said by ``session`` (and added to its chat context)."""

        async def speak(sentence: str) -> None:
            await session.say(sentence, add_to_chat_ctx=True)

        self.voice.speak = speak

    async def pick_up(self, session: AgentSession[Any]) -> None:
        """Once ``session`` has started: puts what is waiting in the conversation into the agent's
        chat context, asks the question of a call waiting at its checkpoint and says an outcome no
        relay has told. A Gatehouse that cannot be reached is logged, and the session goes on."""
        self.speak_with(session)
        note = await self.voice.restart_note()
        if note is None:
            return
        agent = session.current_agent
        context = agent.chat_ctx.copy()
        context.add_message(role="system", content=note)
        await agent.update_chat_ctx(context)

    async def aclose(self) -> None:
        """Stops following the conversation's calls (they go on in Gatehouse)."""
        await self.voice.aclose()

    def _tool(self, function: Function) -> RawFunctionTool[Any, Any]:
        voice = self.voice

        async def handle(raw_arguments: Dict[str, Any], context: RunContext[Any]) -> str:
            # LiveKit runs a turn's tools after the tools of the turn before: what the caller said
            # may predate a checkpoint's question spoken meanwhile, which it then does not answer.
            call = context.function_call
            said = [item.created_at for item in context.session.history.items
                    if getattr(item, "role", None) == "user" and item.created_at <= call.created_at]
            return await voice.call(function.name, raw_arguments, call.call_id, said_at=max(said, default=None))

        schema = {"name": function.name, "description": function.description, "parameters": function.parameters}
        return function_tool(handle, raw_schema=schema)
