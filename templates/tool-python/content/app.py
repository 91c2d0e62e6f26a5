"""{{project-name | snake_case}}: {{project-description}}

A Gatehouse tool (docs/tools.md in the Gatehouse repository, "A tool in any language"). Gatehouse
holds each call until the caller confirms it, lets the caller correct it, stops at the checkpoint
that prepare answers, and sends execute once; gatehouse-tool keeps the contract around this code.
Replace the bodies of prepare, execute and discard with requests to your backend, keyed by
call.tool_call_id so a retry can never act twice."""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from gatehouse_tool import Call, Checkpoint, Executed, Tool, ToolFailure, checkpoint, executed
from gatehouse_tool.spin import database, fetch, incoming_handler, variable

# The tool's own tables (migrations/), in its own schema.
QUOTES = "tool_{{project-name | snake_case}}.quotes"

PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["item", "quantity"],
    "additionalProperties": False,
    "properties": {
        "item": {"type": "string", "minLength": 1, "maxLength": 100, "description": "what to order"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "examples": [{"item": "printer paper", "quantity": 3}],
}


class {{project-name | pascal_case}}(Tool):
    def summarize(self, parameters: dict[str, Any]) -> str:
        return f"I'll order {parameters['quantity']} of {parameters['item']}. Shall I?"

    def prepare(self, call: Call) -> Optional[Checkpoint]:
        # The reversible step: a quote, a hold, a draft. Its state comes back in call.checkpoint.
        item, quantity = call.parameters["item"], call.parameters["quantity"]
        database().execute(
            f"INSERT INTO {QUOTES} (tool_call_id, item, quantity) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            call.tool_call_id, item, quantity,
        )
        message = f"I've got a quote for {quantity} of {item}. Shall I place the order?"
        return checkpoint(message, {"quote": f"Q-{_short(call.tool_call_id)}"})

    async def execute(self, call: Call) -> Executed:
        # The irreversible step, sent once. With call.side_effect_may_have_started, ask your backend
        # first whether the order keyed by call.tool_call_id exists, and answer that.
        database().execute(f"UPDATE {QUOTES} SET ordered = true WHERE tool_call_id = $1", call.tool_call_id)
        order = f"O-{_short(call.tool_call_id)}"
        # The backend gatehouse new tool --backend named (the component may reach it): the order
        # is placed there, keyed by the call, so a repeat places nothing twice.
        backend = variable("backend_url")
        if backend:
            answer = await fetch(
                "POST", f"{backend}/orders",
                headers={"idempotency-key": f"{call.tool_call_id}-order"},
                json={"item": call.parameters["item"], "quantity": call.parameters["quantity"]},
            )
            if answer.status in (400, 409, 422):
                raise ToolFailure("The supplier refused the order.")
            if answer.status != 200:
                raise RuntimeError(f"the backend answered {answer.status}")  # a crash: Gatehouse retries
            order = str(answer.json()["order"])
        return executed({"order": order}, f"Ordered. The order number is {order}.")

    def discard(self, call: Call) -> None:
        # Undo what prepare left (release the hold, drop the quote) for a call that will never run.
        database().execute(f"DELETE FROM {QUOTES} WHERE tool_call_id = $1 AND NOT ordered", call.tool_call_id)


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8].upper()


tool = {{project-name | pascal_case}}(
    name="{{project-name | snake_case}}",
    description="{{project-description}}",
    parameters_schema=PARAMETERS,
    effects={"read_only": False, "destructive": False, "idempotent": False, "open_world": True},
)

IncomingHandler = incoming_handler(tool)
