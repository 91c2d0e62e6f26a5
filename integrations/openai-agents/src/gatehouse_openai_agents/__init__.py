"""Gatehouse as the tool backend of a realtime agent of the ``openai-agents`` package
(docs/openai-realtime.md, "Python").

``tools = await GatehouseRealtime.attach(client, session_id)`` makes each tool Gatehouse lists a
function tool that needs approval, beside the conversation's own functions (``confirm_call``,
``change_call``, ``cancel_call``, ``pending_calls``); ``tools.tools`` goes to the
``RealtimeAgent``. Once the session is running, ``await tools.bind(session)``, and the relay's
event loop hands each event to ``tools.handle(event)``:

- the SDK's approval request (``tool_approval_required``) becomes a Gatehouse call held as
  PENDING, and its read-back is spoken; a spoken correction (``change_call``) modifies it;
- the caller's spoken yes (``confirm_call``) confirms it in Gatehouse and its no (``cancel_call``)
  cancels it, in one model response each. The SDK's approval item for that call is left
  undecided: every decision through the SDK sends a function output and starts a model response,
  and the caller's yes already has one;
- an application that shows approvals decides them with the SDK's own
  ``session.approve_tool_call(call_id)`` (the call is confirmed) and ``reject_tool_call``
  (cancelled);
- the checkpoint's question and the outcome are spoken when they arrive, and after a relay
  restart ``bind`` picks the conversation up: the calls still waiting for a yes go into the new
  conversation, the checkpoint's question is asked again, an outcome no relay told is spoken once.

Every request runs within the voice session's deadline: a Gatehouse that hangs costs the caller
``deadline`` seconds, then a true sentence."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Dict, List, Optional, Sequence, Set, Tuple, TypeVar

from agents.realtime import (
    RealtimeItem,
    RealtimeSession,
    RealtimeSessionEvent,
    RealtimeToolApprovalRequired,
    RealtimeToolEnd,
)
from agents.realtime.model_inputs import RealtimeModelSendRawMessage
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from gatehouse_client import AsyncGatehouse, GatehouseConnectionError, GatehouseError
from gatehouse_client.types import ContextResponse
from gatehouse_client.voice import CANCEL, CONFIRM, SESSION_FUNCTIONS, SESSION_NAMES, Function, Proposal, VoiceSession

__all__ = ["GatehouseRealtime", "HeldApproval", "assistant_text", "speaking_instructions"]

log = logging.getLogger("gatehouse_openai_agents")

_T = TypeVar("_T")


@dataclass(frozen=True)
class HeldApproval:
    """An SDK approval held for a Gatehouse call: the SDK's call id, and the call it stands for."""

    call_id: str
    tool_call_id: str
    name: str
    arguments: str


def speaking_instructions(sentence: str) -> str:
    """The instructions of the response that says ``sentence``."""
    return f'Say this to the caller, in your own voice and without adding to it: "{sentence}"'


class GatehouseRealtime:
    """Gatehouse's tools for one conversation of a realtime agent."""

    def __init__(self, voice: VoiceSession, functions: List[Function]) -> None:
        self.voice = voice
        tools = [function for function in functions if function.name not in SESSION_NAMES]
        self._tool_names = {function.name for function in tools}
        self.tools: List[FunctionTool] = [self._gatehouse_tool(f) for f in tools] + [self._session_tool(f) for f in SESSION_FUNCTIONS]
        """The function tools for the ``RealtimeAgent``: Gatehouse's tools, then the session's own."""
        self._session: Optional[RealtimeSession] = None
        # By Gatehouse call, in the order proposed: the approval that stands for it.
        self._held: Dict[str, HeldApproval] = {}
        # By the SDK's call id: the proposal its approval request made (or is making).
        self._proposals: Dict[str, "asyncio.Task[Proposal]"] = {}
        # The SDK's call ids whose approval this package decided itself, or that the caller's
        # spoken answer settled: an SDK rejection of one later is not the caller's no again.
        self._decided: Set[str] = set()
        # By tool and arguments: this package's rejections whose end the SDK has yet to report.
        self._own_rejections: Dict[Tuple[str, str], int] = {}
        self._restored: List[str] = []
        self._tasks: Set["asyncio.Task[Any]"] = set()

    @classmethod
    async def attach(
        cls,
        client: AsyncGatehouse,
        session_id: str,
        *,
        deadline: float = 4.0,
        filler_after: Optional[float] = None,
        follow_for: float = 600.0,
    ) -> "GatehouseRealtime":
        """The tools of conversation ``session_id`` (Gatehouse's session: the same after a relay
        restart). ``deadline`` is when the model gets a true sentence whatever Gatehouse does;
        ``filler_after`` when a filler line is spoken meanwhile (never by default: a realtime model
        speaks while its tool runs). Raises the client's error if Gatehouse's tool list cannot be
        read (docs/openai-realtime.md, "When Gatehouse is down")."""
        voice = VoiceSession(client, session_id, deadline=deadline, filler_after=filler_after, follow_for=follow_for)
        return cls(voice, await voice.functions())

    async def bind(self, session: RealtimeSession) -> None:
        """Binds to a running session: what arrives later is spoken through it, and the
        conversation is picked up (the calls still waiting for a yes are put into it:
        ``restored_calls``; a running call is followed again), within the deadline."""
        self._session = session
        self.voice.speak = self._speak
        await self._restore(session)

    def handle(self, event: RealtimeSessionEvent) -> None:
        """Every event of the session, from the relay's ``async for event in session`` loop. It
        returns at once: what an event starts runs beside the loop."""
        if isinstance(event, RealtimeToolApprovalRequired) and event.tool.name in self._tool_names:
            if event.call_id not in self._proposals:
                self._proposals[event.call_id] = self._start(self._propose(event.call_id, event.tool.name, event.arguments))
        elif isinstance(event, RealtimeToolEnd) and event.tool.name in self._tool_names:
            # An end this package did not cause is the application's reject_tool_call. The SDK
            # names no call id: the tool and its arguments find the call (Gatehouse holds one
            # waiting call per action and session), and the ends of this package's own rejections,
            # which come in the order they were made, are counted off first.
            own = (event.tool.name, event.arguments)
            if self._own_rejections.get(own, 0) > 0:
                self._own_rejections[own] -= 1
                return
            for held in list(self._held.values()):
                if held.name == event.tool.name and held.arguments == event.arguments and held.call_id not in self._decided:
                    self._decided.add(held.call_id)
                    self._start(self._rejected(held))

    @property
    def pending_approvals(self) -> List[HeldApproval]:
        """The approvals waiting for a decision, oldest first."""
        return list(self._held.values())

    @property
    def restored_calls(self) -> Sequence[str]:
        """The calls proposed before a relay restart that still waited for a yes at ``bind``."""
        return tuple(self._restored)

    async def confirm_call(self, tool_call_id: str) -> str:
        """Confirms a call waiting for its yes (a restored one, for an application that shows them)."""
        return await self._decide(CONFIRM, tool_call_id, {"tool_call_id": tool_call_id})

    async def cancel_call(self, tool_call_id: str, reason: Optional[str] = None) -> str:
        """Cancels a call waiting for its yes (a restored one, for an application that shows them)."""
        arguments: Dict[str, Any] = {"tool_call_id": tool_call_id}
        if reason:
            arguments["reason"] = reason
        return await self._decide(CANCEL, tool_call_id, arguments)

    async def aclose(self) -> None:
        """Stops following the conversation's calls (they go on in Gatehouse)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.voice.aclose()

    def _start(self, work: Coroutine[Any, Any, _T]) -> "asyncio.Task[_T]":
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _gatehouse_tool(self, function: Function) -> FunctionTool:
        async def approved(context: ToolContext[Any], _arguments: str) -> str:
            # The application approved (session.approve_tool_call): the call Gatehouse holds is
            # confirmed, with its parameters as corrected since (Gatehouse's, not the SDK's first
            # arguments).
            call_id = context.tool_call_id
            self._decided.add(call_id)
            proposal = await self._proposals[call_id] if call_id in self._proposals else None
            if proposal is None or proposal.outcome != "proposed" or proposal.tool_call_id is None:
                return "There is nothing waiting for that yes; nothing was done."
            self._held.pop(proposal.tool_call_id, None)
            return await self.voice.call(CONFIRM, {"tool_call_id": proposal.tool_call_id}, call_id)

        return _function_tool(function, approved, needs_approval=True)

    def _session_tool(self, function: Function) -> FunctionTool:
        async def run(context: ToolContext[Any], arguments: str) -> str:
            answer = await self.voice.call(function.name, arguments, context.tool_call_id)
            if function.name in (CONFIRM, CANCEL) and self._held:
                self._start(self._settle_by_voice())
            return answer

        return _function_tool(function, run, needs_approval=False)

    async def _settle_by_voice(self) -> None:
        """After the caller's spoken yes or no: the approvals whose call no longer waits for one
        are no longer held (read beside the answer, so the model's turn never waits on it)."""
        context = await self._calls("the held approvals were not checked")
        if context is None:
            return
        waiting = {call["tool_call_id"] for call in context["pending"] if call["status"] == "PENDING"}
        for tool_call_id in [id for id in self._held if id not in waiting]:
            self._decided.add(self._held.pop(tool_call_id).call_id)

    async def _propose(self, call_id: str, name: str, arguments: str) -> Proposal:
        """An approval request made a Gatehouse call: held and read back, or decided at once."""
        try:
            proposal = await self.voice.propose(name, arguments, call_id)
            if proposal.outcome == "proposed" and proposal.tool_call_id is not None:
                self._held[proposal.tool_call_id] = HeldApproval(call_id, proposal.tool_call_id, name, arguments)
                await self._speak(proposal.message or proposal.sentence)
            else:
                # The same action already waiting, running or done, a refusal, or Gatehouse
                # unreachable: the approval is answered at once with the sentence that says so.
                self._decided.add(call_id)
                if self._session is not None:
                    own = (name, arguments)
                    self._own_rejections[own] = self._own_rejections.get(own, 0) + 1
                    await self._session.reject_tool_call(call_id, rejection_message=proposal.sentence)
            return proposal
        except Exception:
            # Never a failed task: an approval of it later is answered that nothing waits.
            log.exception("the proposal of %s failed", name)
            return Proposal("refused", "That could not be proposed; nothing was done.")

    async def _rejected(self, held: HeldApproval) -> None:
        """A held approval the application rejected: its call is cancelled."""
        self._held.pop(held.tool_call_id, None)
        await self.voice.call(CANCEL, {"tool_call_id": held.tool_call_id, "reason": "rejected"}, held.call_id)

    async def _decide(self, name: str, tool_call_id: str, arguments: Dict[str, Any]) -> str:
        held = self._held.pop(tool_call_id, None)
        if held is not None:
            self._decided.add(held.call_id)
        return await self.voice.call(name, arguments, f"{name}:{tool_call_id}")

    async def _speak(self, sentence: str) -> None:
        if self._session is None:
            return
        response = {"instructions": speaking_instructions(sentence)}
        await self._session.model.send_event(
            RealtimeModelSendRawMessage(message={"type": "response.create", "other_data": {"response": response}})
        )

    async def _calls(self, otherwise: str) -> Optional[ContextResponse]:
        """The conversation's calls, read within the deadline; None (logged with ``otherwise``)
        when Gatehouse does not answer them in time."""
        try:
            return await asyncio.wait_for(self.voice.client.get_session_calls(self.voice.session_id), self.voice.deadline)
        except (asyncio.TimeoutError, GatehouseConnectionError, GatehouseError) as error:
            log.warning("%s: %s (session %s)", otherwise, error or "no answer in time", self.voice.session_id)
            return None

    async def _restore(self, session: RealtimeSession) -> None:
        """After a restart: the checkpoint's question asked again, a running call followed, an
        outcome that came while no relay was there spoken (once across relays), and the calls still
        waiting for the caller's yes put into the conversation as what the model knows, so the
        caller's yes (``confirm_call``) or no (``cancel_call``) decides them. The SDK's approvals
        belong to the model response that asked for them, which ended with the old connection, so
        none is rebuilt. Within the deadline, so a Gatehouse that hangs never holds the start."""
        context = await self._calls("the waiting calls were not read")
        if context is None:
            return
        note = self.voice.restart_note_from(context)
        waiting = sorted(
            (call for call in context["pending"] if call["status"] == "PENDING" and call["function_name"] in self._tool_names),
            key=lambda call: call["created_at"],
        )
        self._restored = [call["tool_call_id"] for call in waiting]
        if note is None or not waiting:
            return
        text = f"{note} Those PENDING wait for the caller's yes ({CONFIRM}) or no ({CANCEL})."
        item = {"type": "message", "role": "system", "content": [{"type": "input_text", "text": text}]}
        await session.model.send_event(
            RealtimeModelSendRawMessage(message={"type": "conversation.item.create", "other_data": {"item": item}})
        )


def _function_tool(
    function: Function, run: Callable[[ToolContext[Any], str], Awaitable[str]], *, needs_approval: bool
) -> FunctionTool:
    """The SDK's function tool for ``function``, its JSON Schema as Gatehouse gives it."""
    return FunctionTool(
        name=function.name,
        description=function.description,
        params_json_schema=function.parameters,
        on_invoke_tool=run,
        strict_json_schema=False,
        needs_approval=needs_approval,
    )


def assistant_text(history: Sequence[RealtimeItem]) -> List[str]:
    """The text of everything the assistant said in ``history``, in order."""
    said: List[str] = []
    for item in history:
        if item.type != "message" or item.role != "assistant":
            continue
        text = "".join(
            (getattr(part, "text", None) or getattr(part, "transcript", None) or "") for part in item.content
        )
        if text:
            said.append(text)
    return said
