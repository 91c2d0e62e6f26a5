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
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timezone
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Union

from .aio import AsyncGatehouse
from .errors import GatehouseConnectionError, GatehouseError, NotFoundError, ValidationFailedError
from .types import CancelRequest, CreateResponse, ModifyRequest, PendingCall, ToolCall

log = logging.getLogger("gatehouse_client.voice")

Speak = Callable[[str], Awaitable[None]]
"""How a session speaks a sentence on its own (the framework's ``say``)."""

CONFIRM = "confirm_call"
CHANGE = "change_call"
CANCEL = "cancel_call"
PENDING = "pending_calls"

UNREACHABLE = "I can't reach the system that does that right now, so nothing has been done. Please try again in a moment."
"""What the model is told when Gatehouse does not answer: the truth, and that nothing was done."""

_CALL_ID = {"type": "string", "description": "The call's id, when more than one is waiting; the latest otherwise."}


@dataclass(frozen=True)
class Function:
    """A function to offer the model: its name, what it does, and its parameters (JSON Schema)."""

    name: str
    description: str
    parameters: Dict[str, Any]


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


@dataclass
class VoiceSession:
    """One conversation's tools. ``session_id`` is Gatehouse's session (the conversation's id: the
    same after a relay restart, so its open calls are found again). ``speak`` says what arrives
    after a function has answered: the checkpoint's question and the outcome. ``wait`` is each
    long-poll of a running call (at most 30 s), and a call is followed for at most
    ``follow_for`` seconds. The same action proposed again within ``repeat_window`` seconds of an
    identical completed one is answered with that one's outcome rather than done twice."""

    client: AsyncGatehouse
    session_id: str
    speak: Optional[Speak] = None
    wait: float = 25.0
    follow_for: float = 600.0
    repeat_window: float = 300.0
    _following: Dict[str, "asyncio.Task[None]"] = field(default_factory=dict, init=False, repr=False)

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

    async def call(self, name: str, arguments: Union[str, Mapping[str, Any], None], call_id: str) -> str:
        """What the function call ``name`` (the model's ``arguments``, as JSON text or an object)
        does, and the sentence for the model. ``call_id`` is the framework's id of this function
        call: the same id is the same call."""
        try:
            parsed = _arguments(arguments)
        except ValueError as bad:
            return f"That request was malformed ({bad}); nothing was done."
        try:
            if name == CONFIRM:
                return await self._confirm(parsed.get("tool_call_id"))
            if name == CHANGE:
                return await self._change(parsed.get("tool_call_id"), parsed.get("changes"), parsed.get("reason"))
            if name == CANCEL:
                return await self._cancel(parsed.get("tool_call_id"), parsed.get("reason"))
            if name == PENDING:
                return await self._pending()
            return await self._propose(name, parsed, call_id)
        except GatehouseConnectionError:
            log.warning("Gatehouse did not answer %s for session %s", name, self.session_id)
            return UNREACHABLE
        except ValidationFailedError as refused:
            problems = "; ".join(f"{p['field']} {p['problem']}" for p in refused.fields) or str(refused)
            return f"That can't be done as asked: {problems}. Ask the caller for the right details."
        except GatehouseError as error:
            if error.status >= 500:
                return UNREACHABLE
            return error.message

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
        for task in self._following.values():
            task.cancel()
        await asyncio.gather(*self._following.values(), return_exceptions=True)
        self._following.clear()

    async def _propose(self, name: str, parameters: Dict[str, Any], call_id: str) -> str:
        # A model that lost a function's answer to a barge-in makes the call again, with a new
        # call id: the same action already waiting, running or just done is that call.
        context = await self.client.get_session_calls(self.session_id)
        for open_call in context["pending"]:
            if open_call["function_name"] == name and open_call["parameters"] == parameters:
                id = open_call["tool_call_id"]
                if open_call["status"] == "PENDING":
                    return f"That is already waiting for the caller's yes. (Call id: {id}.)"
                self._follow(id)
                return f"That is already under way; I'll say how it went. (Call id: {id}.)"
        now = datetime.now(timezone.utc)
        for settled in context["recent"]:
            if (
                settled["function_name"] == name
                and settled["parameters"] == parameters
                and settled["status"] == "COMPLETED"
                and (now - _instant(settled["created_at"])).total_seconds() <= self.repeat_window
            ):
                done = settled["voice_response"] or "It was done."
                return f"That was already done: {done} Don't do it again unless the caller asks for another. (Call id: {settled['tool_call_id']}.)"
        created = await self._create(name, parameters, call_id)
        return f"{created['message']} (Read this to the caller and wait for their answer. Call id: {created['tool_call_id']}.)"

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

    async def _confirm(self, tool_call_id: Any) -> str:
        target = await self._target(tool_call_id)
        if target is None:
            return "There is nothing waiting for the caller's yes."
        id = target["tool_call_id"]
        accepted: Mapping[str, object]
        if target["status"] == "PENDING":
            accepted = await self.client.confirm_tool_call(id)
        elif target["status"] == "PREPARED":
            accepted = await self.client.resume_execution(id, {"action": "proceed"})
        else:
            self._follow(id)
            return "That is already under way; I'll say how it went."
        self._follow(id)
        return str(accepted.get("message") or "Done; I'll let the caller know how it goes.")

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
        cancelled = await self.client.cancel_tool_call(target["tool_call_id"], request)
        return str(cancelled["message"])

    async def _pending(self) -> str:
        context = await self.client.get_session_calls(self.session_id)
        if not context["pending"]:
            return "Nothing is waiting."
        lines = [
            f"{call['tool_call_id']}: {call['function_name']} {json.dumps(call['parameters'])} ({call['status']})"
            for call in context["pending"]
        ]
        return "Waiting: " + "; ".join(lines)

    def _follow(self, tool_call_id: str) -> None:
        """Speaks what the call reaches next: its checkpoint's question, or its outcome."""
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
            if call["status"] in ("PENDING", "EXECUTING"):
                # A long-poll answers EXECUTING when its wait ran out; PENDING is a call that was
                # never confirmed (a lost confirm): looked at again, not spoken of.
                if call["status"] == "PENDING":
                    await asyncio.sleep(1.0)
                continue
            sentence = _news(call)
            if sentence:
                await self.speak(sentence)
            return
        log.warning("stopped following %s after %.0f s", tool_call_id, self.follow_for)


def _news(call: ToolCall) -> Optional[str]:
    """What to tell the caller about a call that left EXECUTING; None for a call that was
    cancelled (the caller asked for that, and heard the answer)."""
    status = call["status"]
    if status == "PREPARED":
        checkpoint = call.get("checkpoint") or {}
        return str(checkpoint.get("message") or call.get("summary") or "It's ready. Shall I go ahead?")
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
