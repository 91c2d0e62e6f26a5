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
from .schema_problems import KEYWORDS, OTHERWISE, TYPES

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


def says(keyword: str, **values: str) -> str:
    """The sentence for a refusal by ``keyword`` (sdk/schema-problems.json, the one source every
    language's sentences come from), its ``{name}``s filled from ``values``."""
    template = KEYWORDS.get(keyword)
    if template is None:
        return OTHERWISE
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def _words(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _problems(broken: fastjsonschema.JsonSchemaValueException, parameters: Any) -> list[FieldProblem]:
    definition = broken.definition if isinstance(broken.definition, dict) else {}
    value = broken.value
    rule = str(broken.rule or "")
    if rule == "required" and isinstance(value, dict):
        missing = [name for name in definition.get("required", []) if name not in value]
        return [{"field": name, "problem": says("required")} for name in missing]
    if rule == "additionalProperties" and isinstance(value, dict):
        known = set(definition.get("properties", {}))
        return [{"field": name, "problem": says("additionalProperties")} for name in value if name not in known]
    path = [str(part) for part in (broken.path or [])][1:]
    field = ".".join(path) if path else "parameters"
    stated = definition.get(rule)
    if rule == "type":
        kinds = stated if isinstance(stated, list) else [stated]
        problem = says("type", expected=" or ".join(TYPES.get(str(kind), str(kind)) for kind in kinds))
    elif rule == "enum":
        problem = says("enum", options=", ".join(_words(option) for option in (stated or [])))
    elif rule == "const":
        problem = says("const", expected=json.dumps(stated))
    elif rule == "format":
        problem = says("format", format=str(stated))
    elif rule in KEYWORDS:
        problem = says(rule, limit=_words(stated))
    else:
        problem = OTHERWISE
    return [{"field": field, "problem": problem}]
