"""Gatehouse as the tool backend of a Pipecat pipeline (docs/pipecat.md).

``tools = await GatehouseTools.attach(llm, client, session_id)`` registers every tool Gatehouse
lists, and the conversation's confirm, change, cancel and pending functions, on the pipeline's
LLM service, and answers the ``ToolsSchema`` to give its context. What each function does is
``gatehouse_client.voice``'s: a proposal is held as PENDING until the caller says yes, a
correction changes it, the checkpoint's question and the outcome are spoken when they arrive.

Interruptions: a proposal the caller interrupts is cancelled in Gatehouse (it was never
confirmed, so nothing is lost); a confirmation is never cancelled by an interruption, so a
side effect the caller agreed to is never cut off half way (it runs in Gatehouse, which does it
once).

Late news is Pipecat's own async function result: ``confirm_call`` is registered as an async
function (``cancel_on_interruption=False``), its answer ("I'm on it") is an intermediate result,
and the call stays open until the news it set going arrives (the checkpoint's question, or the
outcome), which is its final result: the model is given the sentence to say, in the context, and
runs. News with no function call open for it (after a restart, or a second yes's) is spoken with
a ``TTSSpeakFrame``.

When the pipeline starts (its ``StartFrame``), the conversation is picked up
(``VoiceSession.pick_up``): what is waiting goes into the LLM context, the question of a call
waiting at its checkpoint is asked, and the outcome of a call that settled while no relay was
there is spoken, once across relays."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Optional, Set

from gatehouse_client import AsyncGatehouse
from gatehouse_client.voice import CONFIRM, SESSION_NAMES, Function, VoiceSession
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.frames.frames import Frame, FunctionCallResultProperties, LLMMessagesAppendFrame, StartFrame, TTSSpeakFrame
from pipecat.services.llm_service import FunctionCallParams, LLMService

__all__ = ["GatehouseTools"]

class GatehouseTools:
    """Gatehouse's tools on one pipeline's LLM service, for one conversation."""

    def __init__(self, llm: LLMService[Any], voice: VoiceSession, functions: List[Function]) -> None:
        self.llm = llm
        self.voice = voice
        self.functions = functions
        self._picked_up = False
        self._tasks: Set["asyncio.Task[None]"] = set()
        # By Pipecat's call id: the confirm_call function calls still open for their news.
        self._open: Dict[str, FunctionCallParams] = {}

    @classmethod
    async def attach(
        cls,
        llm: LLMService[Any],
        client: AsyncGatehouse,
        session_id: str,
        *,
        deadline: float = 4.0,
        filler_after: Optional[float] = 0.8,
    ) -> "GatehouseTools":
        """Registers the conversation's functions on ``llm``; ``tools.schema`` goes in the context.
        ``session_id`` is the conversation's: the same after a relay restart. ``deadline`` and
        ``filler_after`` are the voice session's (seconds): when the model gets a true sentence
        whatever Gatehouse does, and when a filler line is spoken meanwhile. Raises the client's
        error if Gatehouse's tool list cannot be read (docs/pipecat.md, "When Gatehouse is down")."""
        session = VoiceSession(client, session_id, deadline=deadline, filler_after=filler_after)
        functions = await session.functions()
        tools = cls(llm, session, functions)
        session.speak = tools._speak
        session.tell = tools._tell
        for function in functions:
            # A confirmation runs to its end whatever the caller says meanwhile.
            llm.register_function(function.name, tools._handle, cancel_on_interruption=function.name != CONFIRM)
        llm.add_event_handler("on_after_process_frame", tools._on_frame)
        return tools

    async def pick_up(self) -> None:
        """Puts what is waiting in the conversation into the LLM context, asks the question of a
        call waiting at its checkpoint and speaks an outcome no relay has told. Done once when the
        pipeline starts; a relay may call it itself."""
        self._picked_up = True
        note = await self.voice.restart_note()
        if note is not None:
            await self.llm.push_frame(LLMMessagesAppendFrame(messages=[{"role": "system", "content": note}], run_llm=False))

    async def _on_frame(self, _processor: Any, frame: Frame) -> None:
        if isinstance(frame, StartFrame) and not self._picked_up:
            self._picked_up = True
            task = asyncio.get_running_loop().create_task(self.pick_up())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    @property
    def schema(self) -> ToolsSchema:
        """The functions as the context's tools."""
        return ToolsSchema(
            standard_tools=[
                FunctionSchema(
                    name=function.name,
                    description=function.description,
                    properties=dict(function.parameters.get("properties", {})),
                    required=list(function.parameters.get("required", [])),
                )
                for function in self.functions
            ]
        )

    async def aclose(self) -> None:
        """Stops following the conversation's calls (they go on in Gatehouse)."""
        self._open.clear()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.voice.aclose()

    async def _handle(self, params: FunctionCallParams) -> None:
        call_id = params.tool_call_id
        if params.function_name == CONFIRM:
            self._open[call_id] = params
        try:
            answer = await self.voice.call(params.function_name, dict(params.arguments), call_id)
        except asyncio.CancelledError:
            self._open.pop(call_id, None)
            if params.function_name not in SESSION_NAMES:
                # Interrupted before the caller heard it: withdrawn, so a later yes cannot confirm it.
                await asyncio.shield(self.voice.withdraw(params.function_name, dict(params.arguments), call_id))
            raise
        if params.function_name != CONFIRM:
            await params.result_callback(answer)
        elif call_id not in self._open:
            # The news came first and was this call's result: the answer was overtaken by it.
            return
        elif self.voice.awaits_news(call_id):
            await params.result_callback(answer, properties=FunctionCallResultProperties(is_final=False))
        else:
            del self._open[call_id]
            await params.result_callback(answer)

    async def _tell(self, call_id: str, sentence: str) -> bool:
        """The news of a call, as the final result of the yes still open for it."""
        params = self._open.pop(call_id, None)
        if params is None:
            return False
        await params.result_callback(f'Say this to the caller, and nothing else: "{sentence}"')
        return True

    async def _speak(self, sentence: str) -> None:
        # Said, and kept in the context so the model knows the caller heard it.
        await self.llm.push_frame(TTSSpeakFrame(sentence))
        await self.llm.push_frame(LLMMessagesAppendFrame(messages=[{"role": "assistant", "content": sentence}], run_llm=False))


