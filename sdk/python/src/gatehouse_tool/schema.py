"""Parameters checked against the tool's JSON Schema, each problem naming its field. The schema
is compiled once (fastjsonschema: pure Python, so it runs inside a component too)."""

from __future__ import annotations

# fastjsonschema's code generator escapes strings with this codec; imported here so a component
# built with componentize-py has it (only what is imported while it is built is packed).
import encodings.unicode_escape  # noqa: F401
import json
from typing import Any, Callable

import fastjsonschema

from .contract import FieldProblem

_compiled: dict[str, Callable[[Any], Any]] = {}


def compile_schema(schema: dict[str, Any]) -> None:
    """Compiles ``schema`` now (a tool does at its construction, so a component builds its
    validator while it is pre-initialized, not on its first request)."""
    _validator(schema)


def _validator(schema: dict[str, Any]) -> Callable[[Any], Any]:
    key = json.dumps(schema, sort_keys=True)
    if key not in _compiled:
        _compiled[key] = fastjsonschema.compile(schema)
    return _compiled[key]


def check_parameters(schema: dict[str, Any], parameters: Any) -> list[FieldProblem]:
    """Every problem the schema finds with ``parameters`` that can be told apart (fastjsonschema
    stops at the first rule broken; a missing or unknown field names each field)."""
    try:
        _validator(schema)(parameters)
        return []
    except fastjsonschema.JsonSchemaValueException as broken:
        return _problems(broken, parameters)


def _problems(broken: fastjsonschema.JsonSchemaValueException, parameters: Any) -> list[FieldProblem]:
    definition = broken.definition if isinstance(broken.definition, dict) else {}
    value = broken.value
    if broken.rule == "required" and isinstance(value, dict):
        missing = [name for name in definition.get("required", []) if name not in value]
        return [{"field": name, "problem": "is required"} for name in missing]
    if broken.rule == "additionalProperties" and isinstance(value, dict):
        known = set(definition.get("properties", {}))
        return [{"field": name, "problem": "is not a parameter of this tool"} for name in value if name not in known]
    path = [str(part) for part in (broken.path or [])][1:]
    field = ".".join(path) if path else "parameters"
    message = str(broken.message)
    prefix = ".".join(["data", *path])
    problem = message[len(prefix):].strip() if message.startswith(prefix) else message
    return [{"field": field, "problem": problem or "is not valid"}]
