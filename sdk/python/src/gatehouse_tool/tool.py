"""What a tool written with this package implements: a subclass of :class:`Tool`. The package
serves the contract around it (signatures, ordering, at-most-once ``execute``); the tool holds
only its own logic. Any method may be ``async``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Optional, TypeVar, Union

from .contract import Checkpoint, Executed, FieldProblem, ToolDescription, ToolEffects
from .schema import check_parameters, compile_schema

Parameters = dict[str, Any]
T = TypeVar("T")
MaybeAwaitable = Union[T, Awaitable[T]]
"""What a tool's method returns: the value, or (an ``async def``) a coroutine of it."""


class ToolFailure(Exception):
    """The tool's definitive no, answered 422: the call becomes FAILED and the agent speaks
    ``message``. Anything else a tool raises is a crash (500), and Gatehouse tries again later.

    From ``execute``, ``may_have_acted=True`` says the tool cannot tell whether it acted (its
    backend did not answer): the caller is told so and what ``prepare`` left is kept; without it a
    failed ``execute`` means nothing was done, and the preparation is discarded."""

    def __init__(self, message: str, *, may_have_acted: bool = False) -> None:
        message = message.strip() or "The tool couldn't do that."
        super().__init__(message)
        self.message = message
        self.may_have_acted = may_have_acted


class InvalidParameters(Exception):
    """``validate``'s no: every problem found, each naming its field in words an agent can speak."""

    def __init__(self, problems: list[FieldProblem]) -> None:
        super().__init__("; ".join(f"{p['field']} {p['problem']}" for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Call:
    """The call an operation acts on, as the tool first saw it: the parameters and checkpoint
    are the ones recorded at its first ``prepare`` (or ``execute``), not a later request's."""

    tool_call_id: str
    parameters: Parameters
    session_id: Optional[str] = None
    checkpoint: Optional[Checkpoint] = None
    attempt: int = 1
    side_effect_may_have_started: bool = False
    """Set on an ``execute`` that an earlier attempt may already have run: find out first (by
    ``tool_call_id``, or the idempotency key sent to the backend) and answer that outcome."""
    trace_id: Optional[str] = None


@dataclass
class Tool:
    """A tool. Set the description's fields; override :meth:`summarize` and :meth:`execute`, and
    for a tool with a checkpoint (``needs_checkpoint``, the default) :meth:`prepare` and
    :meth:`discard` too. :meth:`validate` checks the parameters against ``parameters_schema``;
    override it to normalize them or check more, calling :meth:`check` first."""

    name: str
    description: str
    parameters_schema: dict[str, Any]
    needs_checkpoint: bool = True
    aliases: list[str] = field(default_factory=list)
    version: str = "0.1.0"
    effects: Optional[ToolEffects] = None

    def __post_init__(self) -> None:
        compile_schema(self.parameters_schema)

    def describe(self) -> ToolDescription:
        described: ToolDescription = {
            "name": self.name,
            "description": self.description,
            "parameters_schema": self.parameters_schema,
            "needs_checkpoint": self.needs_checkpoint,
            "version": self.version,
        }
        if self.aliases:
            described["aliases"] = list(self.aliases)
        if self.effects is not None:
            described["effects"] = self.effects
        return described

    def check(self, parameters: Parameters) -> Parameters:
        """``parameters`` if ``parameters_schema`` accepts them; else :class:`InvalidParameters`
        naming each field."""
        problems = check_parameters(self.parameters_schema, parameters)
        if problems:
            raise InvalidParameters(problems)
        return parameters

    def validate(self, parameters: Parameters) -> MaybeAwaitable[Parameters]:
        """The parameters to record, normalized; raise :class:`InvalidParameters` to refuse."""
        return self.check(parameters)

    def summarize(self, parameters: Parameters) -> MaybeAwaitable[str]:
        """The sentence the agent speaks to have the caller confirm: the same parameters always
        give the same sentence."""
        raise NotImplementedError("a tool says what it will do: override summarize")

    def prepare(self, call: Call) -> MaybeAwaitable[Optional[Checkpoint]]:
        """Everything up to the irreversible step (a hold, a draft, a quote): the checkpoint
        (``{"message": ..., "state": ...}``), or None for nothing to confirm."""
        return None

    def execute(self, call: Call) -> MaybeAwaitable[Executed]:
        """The irreversible step, run at most once per call: an :data:`Executed`
        (``{"result": ..., "voice_response": ...}``)."""
        raise NotImplementedError("a tool does something: override execute")

    def discard(self, call: Call) -> MaybeAwaitable[None]:
        """Undo what :meth:`prepare` left, for a call that will never run."""
        return None


def executed(result: Any, voice_response: str) -> Executed:
    """An ``execute``'s answer."""
    return {"result": result, "voice_response": voice_response}


def checkpoint(message: str, state: Any = None) -> Checkpoint:
    """A ``prepare``'s checkpoint: what the agent says before the irreversible step, and the
    tool's own state, handed back to ``execute`` and ``discard`` in ``call.checkpoint``."""
    made: Checkpoint = {"message": message}
    if state is not None:
        made["state"] = state
    return made
