"""Validation of the tool and structured-output parts of a policy request (pure).

Every rule raises ``InvalidArgument`` naming the field as the proto spells it: a tool whose
parameters are not a JSON-schema object (``input.tools.tools[0].parameters_json``), a schema
the grammar compiler cannot handle (``sampling.constraint.json_schema``), a tool_choice naming
no given tool (``input.tools.choice``), a tool message answering no earlier call
(``input.messages[3].tool_call_id``).
"""

from __future__ import annotations

import re

from services.common.errors import InvalidArgument, require
from services.common.json_constraint import SchemaError, check_schema
from services.common.tool_calls import ToolCall, canonical_arguments, new_call_id
from services.gen.ttc.v1 import common_pb2
from services.policy.engines.base import Constraint, ToolDef, ToolSpec

#: OpenAI's rule for function names
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_TOOLS = 128
CHOICES = ("auto", "none", "required")


def _schema(text: str, field: str) -> None:
    try:
        check_schema(text)
    except SchemaError as exc:
        raise InvalidArgument(str(exc), field=field) from None


def to_tool_spec(msg: common_pb2.ToolSpec, field: str) -> ToolSpec | None:
    """Check and convert a ``ToolSpec`` (None when it names no tools)."""
    if not msg.tools:
        require(msg.choice in ("", "auto", "none"), f"{field}.choice", "tool_choice needs tools")
        return None
    require(len(msg.tools) <= MAX_TOOLS, f"{field}.tools", f"at most {MAX_TOOLS} tools")
    tools: list[ToolDef] = []
    for i, t in enumerate(msg.tools):
        where = f"{field}.tools[{i}]"
        require(
            bool(TOOL_NAME.match(t.name)), f"{where}.name", f"a tool name is 1-64 of a-z A-Z 0-9 _ -, got {t.name!r}"
        )
        require(all(t.name != u.name for u in tools), f"{where}.name", f"tool {t.name!r} is given twice")
        if t.parameters_json.strip():
            _schema(t.parameters_json, f"{where}.parameters_json")
        tools.append(ToolDef(t.name, t.description, t.parameters_json, t.strict))
    choice = msg.choice or "auto"
    names = [t.name for t in tools]
    require(
        choice in CHOICES or choice in names,
        f"{field}.choice",
        f"tool_choice must be auto, none, required or a given tool's name ({', '.join(names)}), got {choice!r}",
    )
    return ToolSpec(tools=tuple(tools), choice=choice, parallel=msg.parallel)


def to_tool_calls(calls: list[common_pb2.ToolCall], role: str, field: str) -> tuple[ToolCall, ...]:
    """An assistant turn's earlier calls: named, with arguments that are a JSON object."""
    if not calls:
        return ()
    require(role == "assistant", field, "only assistant messages carry tool_calls")
    out = []
    for j, c in enumerate(calls):
        require(bool(c.name), f"{field}[{j}].name", "a tool call needs the function's name")
        try:
            arguments = canonical_arguments(c.arguments or "{}")
        except ValueError as exc:
            raise InvalidArgument(f"arguments must be a JSON object: {exc}", field=f"{field}[{j}].arguments") from None
        out.append(ToolCall(id=c.id or new_call_id(), name=c.name, arguments=arguments))
    return tuple(out)


def check_tool_turns(messages: list[common_pb2.ChatMessage], field: str) -> None:
    """Every tool message answers a call made by an earlier assistant message."""
    called: set[str] = set()
    for i, m in enumerate(messages):
        called.update(c.id for c in m.tool_calls if c.id)
        if m.role == "tool":
            require(
                bool(m.tool_call_id),
                f"{field}.messages[{i}].tool_call_id",
                "a tool message needs the tool_call_id of the call it answers",
            )
            require(
                m.tool_call_id in called,
                f"{field}.messages[{i}].tool_call_id",
                f"no earlier assistant message made a tool call with id {m.tool_call_id!r}",
            )


def to_constraint(msg: common_pb2.OutputConstraint, field: str = "sampling.constraint") -> Constraint | None:
    """Check and convert an ``OutputConstraint`` (None when unset)."""
    kind = msg.WhichOneof("kind")
    if kind is None:
        return None
    if kind == "json_object":
        return Constraint("json_object") if msg.json_object else None
    _schema(msg.json_schema, f"{field}.json_schema")
    return Constraint("json_schema", msg.json_schema)
