"""A team's own web service with a Gatehouse tool beside its code: a clinic's appointment book
(Starlette), whose `move_appointment` tool is mounted at /gatehouse with the gatehouse-tool
package. `prepare` holds the new slot, `execute` moves the appointment, `discard` releases the
hold; Gatehouse holds the call for the caller's confirmation and runs `execute` once.

    GATEHOUSE_CONTRACT_SECRET=... uvicorn clinic:app --port 8400
    # Gatehouse: tool_registry = "move_appointment=http://127.0.0.1:8400/gatehouse"

GET /appointments lists the book, for a person (or a test) to see what the tool did."""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from gatehouse_tool import (
    Call, Checkpoint, Executed, InvalidParameters, SqliteStore, Tool, ToolFailure, checkpoint, contract_app, executed,
)


class Book:
    """The clinic's appointments and the slots held for a move (its real system, in memory)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.appointments: dict[str, str] = {"A-100": "2026-12-01T09:00", "A-101": "2026-12-01T10:00"}
        self.holds: dict[str, str] = {}  # held slot -> the call holding it
        self.moves: list[tuple[str, str]] = []

    def taken(self, slot: str) -> bool:
        return slot in self.appointments.values() or slot in self.holds


book = Book()

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["appointment_id", "new_time"],
    "additionalProperties": False,
    "properties": {
        "appointment_id": {"type": "string", "pattern": "^A-[0-9]{3}$"},
        "new_time": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}$"},
    },
    "examples": [{"appointment_id": "A-100", "new_time": "2026-12-02T15:00"}],
}


class MoveAppointment(Tool):
    def validate(self, parameters: dict[str, Any]) -> dict[str, Any]:
        accepted = self.check(parameters)
        if accepted["appointment_id"] not in book.appointments:
            raise InvalidParameters([{"field": "appointment_id", "problem": "is not an appointment of this clinic"}])
        return accepted

    def summarize(self, parameters: dict[str, Any]) -> str:
        return f"I'll move appointment {parameters['appointment_id']} to {parameters['new_time'].replace('T', ' at ')}. Shall I?"

    def prepare(self, call: Call) -> Optional[Checkpoint]:
        slot = call.parameters["new_time"]
        with book.lock:
            if book.holds.get(slot) != call.tool_call_id:
                if book.taken(slot):
                    raise ToolFailure(f"{slot.replace('T', ' at ')} is no longer free.")
                book.holds[slot] = call.tool_call_id
        return checkpoint(f"I've held {slot.replace('T', ' at ')}. Shall I move the appointment?", {"slot": slot})

    def execute(self, call: Call) -> Executed:
        appointment, slot = call.parameters["appointment_id"], call.parameters["new_time"]
        with book.lock:
            if book.appointments.get(appointment) != slot:
                book.holds.pop(slot, None)
                book.appointments[appointment] = slot
                book.moves.append((appointment, slot))
        return executed({"appointment_id": appointment, "time": slot}, f"Done: {appointment} is now at {slot.replace('T', ' at ')}.")

    def discard(self, call: Call) -> None:
        state = call.checkpoint.get("state") if call.checkpoint else None
        slot = state.get("slot") if isinstance(state, dict) else None
        with book.lock:
            if slot and book.holds.get(slot) == call.tool_call_id:
                del book.holds[slot]


tool = MoveAppointment(
    name="move_appointment",
    description="Move a patient's appointment to another time.",
    parameters_schema=SCHEMA,
    aliases=["reschedule_appointment"],
    effects={"read_only": False, "destructive": False, "idempotent": False, "open_world": True},
)


async def appointments(request: Request) -> JSONResponse:
    with book.lock:
        return JSONResponse({"appointments": book.appointments, "holds": book.holds, "moves": book.moves})


secret = os.environ.get("GATEHOUSE_CONTRACT_SECRET", "")
store = SqliteStore(os.environ.get("CLINIC_CONTRACT_DB", "clinic-contract.sqlite3"))
app = Starlette(
    routes=[
        Route("/appointments", appointments),
        Mount("/gatehouse", app=contract_app(tool, secret=secret, store=store)),
    ]
)
