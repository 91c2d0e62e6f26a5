"""Gatehouse as a voice agent's tool backend, the part every voice framework shares
(clients/python/README.md, "Voice frameworks"): the functions to offer the model, and what each
function call does and says.

A framework adapter (LiveKit Agents, Pipecat, ...) offers :meth:`VoiceSession.functions` to its
model as function tools, passes each function call to :meth:`VoiceSession.call` with the
framework's own call id, returns the sentence it answers to the model, and gives the session a
way to speak (``speak``), for what arrives later: the checkpoint's question and the outcome.

What the model gets:

- each tool Gatehouse lists, with its own parameters schema. Calling one *proposes* the call: it
  is held as PENDING and the answer is the sentence to read to the caller. The create's
  idempotency key is the session and the framework's call id, so the same call made again after
  a barge-in or a retry is the same call, never a second one.
- ``confirm_call``: the caller said yes. A PENDING call is confirmed; a call waiting at its
  checkpoint goes ahead. The outcome is spoken when it arrives.
- ``change_call``: the caller corrected something; the answer is the new summary to read back.
- ``cancel_call``: the caller said no.
- ``pending_calls``: what is waiting, for a model that lost track (after a restart, every open
  call of the session is still in Gatehouse: nothing is held in this process).

Every answer is a sentence the model can speak. When Gatehouse cannot be reached, the sentence
says so and that nothing was done; a proposal that may have been made is found again by its key.

Three rules hold for the caller (docs/architecture.md, "Voice sessions"):

- **A checkpoint is answered only after its question was spoken** in this session: a yes to a call
  waiting at its checkpoint whose question the caller has not heard asks the question (once) and
  goes ahead with nothing. An answer to an earlier step that comes back after the call moved past
  it (a slow confirm overtaken by the checkpoint's question) is not spoken.
- **A deadline fit for a phone call**: a filler line after ``filler_after`` seconds, and after
  ``deadline`` seconds the model gets a true sentence to speak (nothing was done, or it cannot yet
  tell), whatever Gatehouse does; the request goes on in the background where that is safe.
- **Pick up after a restart**: :meth:`VoiceSession.pick_up` asks the question of a call waiting at
  its checkpoint, follows a running one, and speaks the outcome of one that settled while no relay
  was there, once across relays (``POST /voice-tools/calls/{id}/outcome-told``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Literal, Mapping, Optional, Set, TypeVar, Union

from .aio import AsyncGatehouse
from .errors import GatehouseConnectionError, GatehouseError, NotFoundError, ValidationFailedError
from .types import CancelRequest, ContextResponse, CreateResponse, ModifyRequest, PendingCall, ToolCall

log = logging.getLogger("gatehouse_client.voice")

Speak = Callable[[str], Awaitable[None]]
"""How a session speaks a sentence on its own (the framework's ``say``)."""

Tell = Callable[[str, str], Awaitable[bool]]
"""How news of a call reaches the model through the function call still open for it: given the
framework's id of that function call and the sentence; answers False when it is no longer open."""

_T = TypeVar("_T")

CONFIRM = "confirm_call"
CHANGE = "change_call"
CANCEL = "cancel_call"
PENDING = "pending_calls"

UNREACHABLE = "I can't reach the system that does that right now, so nothing has been done. Please try again in a moment."
"""What the model is told when Gatehouse does not answer: the truth, and that nothing was done."""

UNSURE = "The system is slow to answer, so I can't tell yet whether that went through. I'll say as soon as I know."
"""What the model is told when a confirmation, correction or cancellation outlives the deadline: it
may have arrived, so nothing is claimed either way; the outcome is spoken when it comes."""

STILL_UNREACHABLE = "I still can't reach the system, so I can't tell whether that went through."
"""Spoken when a request that outlived the deadline finally failed to reach Gatehouse."""

ASKING = "The caller hasn't heard the final question yet; it is being asked now. Wait for their answer before going ahead."
"""A yes to a call at its checkpoint whose question the caller has not heard: the question comes first."""

ASKED_SINCE = "The caller said that before hearing the final question, which was just asked. Wait for their answer to it."
"""A yes the caller gave before the checkpoint's question was spoken, handled after it was: not an answer to it."""

OVERTAKEN = "(Already handled: the caller has since heard what happened. Say nothing about this.)"
"""A late answer to an earlier step of a call that has moved past it: not to be spoken."""

NOTHING_WAITING = "Nothing is waiting."
"""What :meth:`VoiceSession.pick_up` and ``pending_calls`` answer for a conversation with no open call."""

FILLER = "One moment."
"""The default filler line, spoken while a function call waits on Gatehouse."""

_CALL_ID = {"type": "string", "description": "The call's id, when more than one is waiting; the latest otherwise."}


@dataclass(frozen=True)
class Function:
    """A function to offer the model: its name, what it does, and its parameters (JSON Schema)."""

    name: str
    description: str
    parameters: Dict[str, Any]


@dataclass(frozen=True)
class Proposal:
    """What proposing an action came to (:meth:`VoiceSession.propose`): held as PENDING for the
    caller's yes (``proposed``, with its ``tool_call_id`` and its read-back ``message``), the same
    action already waiting, under way or just done, refused, or Gatehouse unreachable. ``sentence``
    is the model's answer in every case."""

    outcome: Literal["proposed", "waiting", "under_way", "done", "refused", "unreachable"]
    sentence: str
    tool_call_id: Optional[str] = None
    message: Optional[str] = None


SESSION_FUNCTIONS = (
    Function(
        CONFIRM,
        "The caller agreed to the action you read back (or, at a checkpoint, to go ahead). Never call "
        "this before the caller has said yes.",
        {"type": "object", "properties": {"tool_call_id": _CALL_ID}, "additionalProperties": False},
    ),
    Function(
        CHANGE,
        "The caller corrected a detail of the action waiting for their yes. Pass only the fields that change.",
        {
            "type": "object",
            "required": ["changes"],
            "properties": {
                "tool_call_id": _CALL_ID,
                "changes": {"type": "object", "description": "The corrected parameters, by name."},
                "reason": {"type": "string", "maxLength": 200, "description": "What the caller said, briefly."},
            },
            "additionalProperties": False,
        },
    ),
    Function(
        CANCEL,
        "The caller does not want the action waiting for their yes.",
        {
            "type": "object",
            "properties": {"tool_call_id": _CALL_ID, "reason": {"type": "string", "maxLength": 200}},
            "additionalProperties": False,
        },
    ),
    Function(
        PENDING,
        "What is waiting for the caller's answer or still running, in this conversation.",
        {"type": "object", "properties": {}, "additionalProperties": False},
    ),
)

SESSION_NAMES = frozenset(function.name for function in SESSION_FUNCTIONS)
"""The names of the session's own functions: a function call by any other name proposes a tool."""


@dataclass
class VoiceSession:
    """One conversation's tools. ``session_id`` is Gatehouse's session (the conversation's id: the
    same after a relay restart, so its open calls are found again). ``speak`` says what arrives
    after a function has answered: the checkpoint's question and the outcome. ``wait`` is each
    long-poll of a running call (at most 30 s), and a call is followed for at most
    ``follow_for`` seconds. The same action proposed again within ``repeat_window`` seconds of an
    identical completed one is answered with that one's outcome rather than done twice.

    ``filler_after`` (seconds, None for never) is when ``filler`` is spoken while a function call
    waits on Gatehouse, and ``deadline`` when the model gets its answer whatever Gatehouse does:
    for a phone call, not the client's generic timeouts (docs/livekit.md, "Deadlines").

    ``tell`` is for a framework with its own way of delivering a late tool result (Pipecat's
    async functions): the news of a call the caller's yes set going (its checkpoint's question, its
    outcome) is given to the model as the result of that yes's function call while it is open
    (:meth:`awaits_news`), and spoken with ``speak`` otherwise."""

    client: AsyncGatehouse
    session_id: str
    speak: Optional[Speak] = None
    wait: float = 25.0
    follow_for: float = 600.0
    repeat_window: float = 300.0
    filler_after: Optional[float] = 0.8
    filler: str = FILLER
    deadline: float = 4.0
    tell: Optional[Tell] = None
    # By call: the framework's function call (its call id) that news of the call goes through, for
    # a framework that delivers a late tool result itself (``tell``): the yes that set it going.
    _news_via: Dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _following: Dict[str, "asyncio.Task[None]"] = field(default_factory=dict, init=False, repr=False)
    # Calls whose checkpoint question the caller heard in this session, and when (time.time()).
    _asked: Dict[str, float] = field(default_factory=dict, init=False, repr=False)
    # By call: how many times this session spoke of it or acted on it, so an answer that comes
    # back after something else happened to the call knows it was overtaken.
    _moves: Dict[str, int] = field(default_factory=dict, init=False, repr=False)
    # Requests that outlived their deadline, and filler lines being said: kept to be cancelled.
    _background: Set["asyncio.Task[Any]"] = field(default_factory=set, init=False, repr=False)
    # This session's own key for outcome marks, so its retry after a lost answer is still first.
    _teller: str = field(default_factory=lambda: secrets.token_hex(8), init=False, repr=False)

    async def functions(self) -> List[Function]:
        """Every available tool Gatehouse lists, then the session's own functions. Raises
        :class:`GatehouseConnectionError` or :class:`GatehouseError` if the list cannot be read."""
        listed = await self.client.list_tools()
        tools = [
            Function(tool["name"], tool["description"], dict(tool["parameters_schema"]))
            for tool in listed["tools"]
            if tool["available"]
        ]
        return tools + list(SESSION_FUNCTIONS)

    async def call(
        self, name: str, arguments: Union[str, Mapping[str, Any], None], call_id: str, *, said_at: Optional[float] = None
    ) -> str:
        """What the function call ``name`` (the model's ``arguments``, as JSON text or an object)
        does, and the sentence for the model, within ``deadline`` seconds. ``call_id`` is the
        framework's id of this function call: the same id is the same call. ``said_at`` is when
        (``time.time()``) the caller said what led to it, for a framework that runs a function
        call later than that: a yes said before a checkpoint's question is not an answer to it."""
        if name not in SESSION_NAMES:
            return (await self.propose(name, arguments, call_id)).sentence
        try:
            parsed = _arguments(arguments)
        except ValueError as bad:
            return f"That request was malformed ({bad}); nothing was done."
        return await self._in_time(name, self._answer(name, parsed, call_id, said_at), lambda work: self._too_late(name, work))

    async def propose(self, name: str, arguments: Union[str, Mapping[str, Any], None], call_id: str) -> Proposal:
        """Proposes the tool ``name`` with the model's ``arguments``, within ``deadline`` seconds,
        for a framework that keeps its own record of what waits for a yes (an approval). Past the
        deadline the answer is ``unreachable`` and a proposal that may have been made is withdrawn
        by its key, so no later yes can confirm what the caller was told was not done."""
        try:
            parsed = _arguments(arguments)
        except ValueError as bad:
            return Proposal("refused", f"That request was malformed ({bad}); nothing was done.")

        def too_late(work: "asyncio.Task[Proposal]") -> Proposal:
            log.warning("Gatehouse did not answer %s within %.1f s for session %s", name, self.deadline, self.session_id)
            work.cancel()
            self._in_background(self.withdraw(name, parsed, call_id))
            return Proposal("unreachable", UNREACHABLE)

        return await self._in_time(name, self._proposal(name, parsed, call_id), too_late)

    async def _in_time(
        self, name: str, answer: Awaitable[_T], too_late: Callable[["asyncio.Task[_T]"], _T]
    ) -> _T:
        """``answer`` within ``deadline`` seconds, with the filler spoken after ``filler_after``;
        past the deadline, what ``too_late`` makes of the unfinished work."""
        loop = asyncio.get_running_loop()
        work = asyncio.ensure_future(answer)
        filler = None
        if self.speak is not None and self.filler_after is not None and self.filler_after < self.deadline:
            filler = loop.call_later(self.filler_after, self._say_filler, work)
        try:
            return await asyncio.wait_for(asyncio.shield(work), self.deadline)
        except asyncio.TimeoutError:
            return too_late(work)
        except asyncio.CancelledError:
            # The framework cut the function call off: a yes, a correction or a cancellation may
            # have arrived and goes on; anything else stops (a proposal is withdrawn by the
            # framework's adapter, by its key).
            if name in (CONFIRM, CHANGE, CANCEL):
                self._in_background(work)
            else:
                work.cancel()
            raise
        finally:
            if filler is not None:
                filler.cancel()

    async def pick_up(self) -> str:
        """After a relay (re)starts on a conversation: asks the question of each call waiting at its
        checkpoint, follows each running call to its outcome, and speaks the outcome of each call
        that settled within ``follow_for`` seconds and whose outcome no relay has told (once, across
        relays). Answers what is waiting, for the framework's conversation state (the model's
        context); raises :class:`GatehouseConnectionError` or :class:`GatehouseError` if the
        session cannot be read."""
        return self.pick_up_from(await self.client.get_session_calls(self.session_id))

    def pick_up_from(self, context: ContextResponse) -> str:
        """:meth:`pick_up` with the conversation's calls already read (the context route's answer),
        for a framework that reads them itself."""
        for open_call in context["pending"]:
            if open_call["status"] in ("PREPARED", "EXECUTING"):
                self._follow(open_call["tool_call_id"])
        now = datetime.now(timezone.utc)
        for settled in context["recent"]:
            recent = (now - _instant(settled["created_at"])).total_seconds() <= self.follow_for
            if recent and settled["status"] in ("COMPLETED", "FAILED", "EXPIRED"):
                self._follow(settled["tool_call_id"])
        return _waiting(context["pending"])

    async def restart_note(self) -> Optional[str]:
        """:meth:`pick_up`, and what a framework then puts into its model's context: the calls
        still open, or None when nothing waits. A session that cannot be read is logged and left
        alone: the conversation goes on without."""
        try:
            context = await self.client.get_session_calls(self.session_id)
        except (GatehouseConnectionError, GatehouseError) as error:
            log.warning("picking up %s: %s", self.session_id, error)
            return None
        return self.restart_note_from(context)

    def restart_note_from(self, context: ContextResponse) -> Optional[str]:
        """:meth:`restart_note` with the conversation's calls already read."""
        waiting = self.pick_up_from(context)
        return None if waiting == NOTHING_WAITING else f"Calls of this conversation from before a restart. {waiting}"

    async def _answer(self, name: str, parsed: Dict[str, Any], call_id: str, said_at: Optional[float] = None) -> str:
        try:
            if name == CONFIRM:
                return await self._confirm(parsed.get("tool_call_id"), call_id, said_at)
            if name == CHANGE:
                return await self._change(parsed.get("tool_call_id"), parsed.get("changes"), parsed.get("reason"))
            if name == CANCEL:
                return await self._cancel(parsed.get("tool_call_id"), parsed.get("reason"))
            return await self._pending()
        except (GatehouseConnectionError, GatehouseError) as error:
            return self._sentence_for(name, error)

    async def _proposal(self, name: str, parsed: Dict[str, Any], call_id: str) -> Proposal:
        try:
            return await self._propose(name, parsed, call_id)
        except (GatehouseConnectionError, GatehouseError) as error:
            sentence = self._sentence_for(name, error)
            return Proposal("unreachable" if sentence == UNREACHABLE else "refused", sentence)

    def _sentence_for(self, name: str, error: Union[GatehouseConnectionError, GatehouseError]) -> str:
        """What the model is told when Gatehouse answered ``name`` with ``error``, or not at all."""
        if isinstance(error, GatehouseConnectionError):
            log.warning("Gatehouse did not answer %s for session %s", name, self.session_id)
            return UNREACHABLE
        if isinstance(error, ValidationFailedError):
            problems = "; ".join(f"{p['field']} {p['problem']}" for p in error.fields) or str(error)
            return f"That can't be done as asked: {problems}. Ask the caller for the right details."
        if error.status >= 500:
            return UNREACHABLE
        return error.message

    def _say_filler(self, work: "asyncio.Future[Any]") -> None:
        if not work.done() and self.speak is not None:
            self._in_background(self.speak(self.filler))

    def _too_late(self, name: str, work: "asyncio.Task[str]") -> str:
        """The sentence for a session function Gatehouse did not answer within the deadline. A read
        is stopped; a confirmation, correction or cancellation may already have arrived, so it goes
        on, and what it finally comes to is spoken."""
        log.warning("Gatehouse did not answer %s within %.1f s for session %s", name, self.deadline, self.session_id)
        if name == PENDING:
            work.cancel()
            return UNREACHABLE
        self._in_background(self._late(work))
        return UNSURE

    async def _late(self, work: "asyncio.Task[str]") -> None:
        sentence = await work
        if self.speak is None:
            return
        if sentence == UNREACHABLE:
            await self.speak(STILL_UNREACHABLE)
        elif sentence not in (OVERTAKEN, ASKING, ASKED_SINCE):
            await self.speak(sentence)

    def _in_background(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def withdraw(self, name: str, arguments: Union[str, Mapping[str, Any], None], call_id: str) -> None:
        """Cancels the proposal the function call ``call_id`` made, if it made one, for a call the
        framework cut off before the model had its answer (the caller never heard it, so no yes
        may confirm it). Looked up by its key: a create that was in flight is found, or made and
        cancelled at once. Only a call still PENDING is cancelled."""
        try:
            created = await self._create(name, _arguments(arguments), call_id)
            id = created["tool_call_id"]
            if (await self.client.get_tool_call(id))["status"] == "PENDING":
                await self.client.cancel_tool_call(id, {"reason": "interrupted before the caller heard it"})
        except (ValueError, GatehouseConnectionError, GatehouseError) as error:
            log.warning("withdrawing the proposal of %s (%s): %s", name, call_id, error)

    async def aclose(self) -> None:
        """Stops following the session's calls (they go on in Gatehouse)."""
        tasks = [*self._following.values(), *self._background]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._following.clear()
        self._background.clear()

    async def _propose(self, name: str, parameters: Dict[str, Any], call_id: str) -> Proposal:
        # A model that lost a function's answer to a barge-in makes the call again, with a new
        # call id: the same action already waiting, running or just done is that call.
        context = await self.client.get_session_calls(self.session_id)
        for open_call in context["pending"]:
            if open_call["function_name"] == name and open_call["parameters"] == parameters:
                id = open_call["tool_call_id"]
                if open_call["status"] == "PENDING":
                    return Proposal("waiting", f"That is already waiting for the caller's yes. (Call id: {id}.)", id)
                self._follow(id)
                return Proposal("under_way", f"That is already under way; I'll say how it went. (Call id: {id}.)", id)
        now = datetime.now(timezone.utc)
        for settled in context["recent"]:
            if (
                settled["function_name"] == name
                and settled["parameters"] == parameters
                and settled["status"] == "COMPLETED"
                and (now - _instant(settled["created_at"])).total_seconds() <= self.repeat_window
            ):
                done = settled["voice_response"] or "It was done."
                id = settled["tool_call_id"]
                sentence = f"That was already done: {done} Don't do it again unless the caller asks for another. (Call id: {id}.)"
                return Proposal("done", sentence, id)
        created = await self._create(name, parameters, call_id)
        id = created["tool_call_id"]
        sentence = f"{created['message']} (Read this to the caller and wait for their answer. Call id: {id}.)"
        return Proposal("proposed", sentence, id, created["message"])

    async def _create(self, name: str, parameters: Dict[str, Any], call_id: str) -> CreateResponse:
        """The proposal of the function call ``call_id``: made once, whoever asks, by its key."""
        return await self.client.create_tool_call(
            {"session_id": self.session_id, "function_name": name, "parameters": parameters},
            idempotency_key=f"voice:{self.session_id}:{call_id}",
        )

    async def _target(self, tool_call_id: Any) -> Optional[PendingCall]:
        """The open call meant: the one named, or the newest open one of the session."""
        pending = (await self.client.get_session_calls(self.session_id))["pending"]
        if isinstance(tool_call_id, str) and tool_call_id:
            return next((call for call in pending if call["tool_call_id"] == tool_call_id), None)
        return max(pending, key=lambda call: call["created_at"], default=None)

    def awaits_news(self, call_id: str) -> bool:
        """Whether the function call ``call_id`` (a yes) is the one the news of its call goes
        through: a framework with ``tell`` keeps it open until then."""
        return call_id in self._news_via.values()

    async def _confirm(self, tool_call_id: Any, call_id: str, said_at: Optional[float] = None) -> str:
        target = await self._target(tool_call_id)
        if target is None:
            return "There is nothing waiting for the caller's yes."
        id = target["tool_call_id"]
        accepted: Mapping[str, object]
        asked_at = self._asked.get(id)
        if target["status"] == "PREPARED" and asked_at is not None and said_at is not None and said_at < asked_at:
            return ASKED_SINCE
        if target["status"] == "PREPARED" and asked_at is None:
            # A yes the checkpoint's question did not come before (a repeated yes over a slow
            # answer, or a restart): the question is asked, and nothing goes ahead.
            if self.speak is None:
                question = _question(await self.client.get_tool_call(id))
                self._asked[id] = time.time()
                return f"{question} (Read this to the caller and wait for their answer.)"
            self._follow(id, news_via=call_id)
            return ASKING
        moves = self._move(id)
        if target["status"] == "PENDING":
            accepted = await self.client.confirm_tool_call(id)
        elif target["status"] == "PREPARED":
            accepted = await self.client.resume_execution(id, {"action": "proceed"})
        else:
            self._follow(id)
            return "That is already under way; I'll say how it went."
        if self._moves.get(id) != moves:
            self._follow(id)
            return OVERTAKEN
        self._follow(id, news_via=call_id)
        return str(accepted.get("message") or "Done; I'll let the caller know how it goes.")

    def _move(self, tool_call_id: str) -> int:
        """Counts one more thing this session did or said about the call; answers the new count."""
        moves = self._moves.get(tool_call_id, 0) + 1
        self._moves[tool_call_id] = moves
        return moves

    async def _change(self, tool_call_id: Any, changes: Any, reason: Any) -> str:
        if not isinstance(changes, dict) or not changes:
            return "Say which details change."
        target = await self._target(tool_call_id)
        if target is None or target["status"] != "PENDING":
            return "There is nothing waiting that can still be changed."
        request: ModifyRequest = {"parameters": changes}
        if isinstance(reason, str) and reason:
            request["reason"] = reason[:200]
        modified = await self.client.modify_tool_call(target["tool_call_id"], request)
        return f"{modified['message']} (Read this back and wait for the caller's answer.)"

    async def _cancel(self, tool_call_id: Any, reason: Any) -> str:
        target = await self._target(tool_call_id)
        if target is None:
            return "There is nothing waiting to cancel."
        request: CancelRequest = {"reason": reason[:200]} if isinstance(reason, str) and reason else {}
        self._move(target["tool_call_id"])
        cancelled = await self.client.cancel_tool_call(target["tool_call_id"], request)
        return str(cancelled["message"])

    async def _pending(self) -> str:
        return _waiting((await self.client.get_session_calls(self.session_id))["pending"])

    def _follow(self, tool_call_id: str, news_via: Optional[str] = None) -> None:
        """Speaks what the call reaches next: its checkpoint's question, or its outcome; through
        the function call ``news_via`` when the framework delivers late results (``tell``) and no
        earlier one is waiting for this news."""
        if news_via is not None and self.tell is not None:
            self._news_via.setdefault(tool_call_id, news_via)
        if self.speak is None or tool_call_id in self._following:
            return
        task = asyncio.get_running_loop().create_task(self._watch(tool_call_id))
        self._following[tool_call_id] = task
        task.add_done_callback(lambda _: self._following.pop(tool_call_id, None))

    async def _watch(self, tool_call_id: str) -> None:
        assert self.speak is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.follow_for
        while loop.time() < deadline:
            try:
                call = await self.client.get_tool_call(tool_call_id, wait=min(self.wait, 30.0))
            except NotFoundError:
                return
            except (GatehouseConnectionError, GatehouseError) as error:
                log.warning("following %s: %s", tool_call_id, error)
                await asyncio.sleep(1.0)
                continue
            if call["status"] in ("PENDING", "EXECUTING") or (call["status"] == "PREPARED" and tool_call_id in self._asked):
                # A long-poll answers EXECUTING when its wait ran out; PENDING is a call that was
                # never confirmed (a lost confirm), PREPARED one whose question was asked: looked
                # at again, not spoken of.
                if call["status"] != "EXECUTING":
                    await asyncio.sleep(1.0)
                continue
            sentence = _news(call)
            if sentence is None or (call["status"] != "PREPARED" and not await self._first_to_tell(tool_call_id)):
                return
            self._move(tool_call_id)
            via = self._news_via.pop(tool_call_id, None)
            if via is None or self.tell is None or not await self.tell(via, sentence):
                await self.speak(sentence)
            if call["status"] == "PREPARED":
                self._asked.setdefault(tool_call_id, time.time())
            return
        log.warning("stopped following %s after %.0f s", tool_call_id, self.follow_for)

    async def _first_to_tell(self, tool_call_id: str) -> bool:
        """Whether this session is the one to speak a settled call's outcome: Gatehouse keeps one
        mark per call, so of two relays on the conversation (one restarted) only one speaks it.
        When the mark cannot be made the outcome is spoken anyway: the caller hearing it twice is
        better than never."""
        try:
            told = await self.client.mark_outcome_told(tool_call_id, idempotency_key=f"voice:{self._teller}:{tool_call_id}")
            return bool(told["first"])
        except (GatehouseConnectionError, GatehouseError) as error:
            log.warning("marking the outcome of %s as told: %s", tool_call_id, error)
            return True


def _waiting(pending: List[PendingCall]) -> str:
    if not pending:
        return NOTHING_WAITING
    lines = [
        f"{call['tool_call_id']}: {call['function_name']} {json.dumps(call['parameters'])} ({call['status']})"
        for call in pending
    ]
    return "Waiting: " + "; ".join(lines)


def _question(call: ToolCall) -> str:
    checkpoint = call.get("checkpoint") or {}
    return str(checkpoint.get("message") or call.get("summary") or "It's ready. Shall I go ahead?")


def _news(call: ToolCall) -> Optional[str]:
    """What to tell the caller about a call that left EXECUTING; None for a call that was
    cancelled (the caller asked for that, and heard the answer)."""
    status = call["status"]
    if status == "PREPARED":
        return _question(call)
    if status == "COMPLETED":
        return str(call.get("voice_response") or "Done.")
    if status == "FAILED":
        return str(call.get("error_message") or "That didn't work, and nothing was done.")
    if status == "EXPIRED":
        return "That request timed out before it ran; nothing was done."
    return None


def _arguments(arguments: Union[str, Mapping[str, Any], None]) -> Dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            raise ValueError("the arguments are not JSON") from None
    else:
        parsed = dict(arguments)
    if not isinstance(parsed, dict):
        raise ValueError("the arguments are not an object")
    return parsed


def _instant(text: str) -> datetime:
    """An RFC 3339 timestamp as Gatehouse writes it (``...Z``)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
