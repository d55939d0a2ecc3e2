"""Tool calls in generated text: parsing, normalizing, validating (pure; no engine, no I/O).

Models trained for function calling write their calls in the chat template's syntax. Qwen2.5
and the Hermes family (the template the engines fall back to for models whose own template
has no tools) write one block per call::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

``parse_tool_calls`` finds those blocks (a last block left unclosed at the end of generation
counts too), and as a fallback a reply that is nothing but a JSON object (or list of objects)
with ``name`` and ``arguments``, the shape small models fall into. Arguments are kept in
canonical JSON (sorted keys, compact), which is what votes compare; ``validate_arguments``
says whether a call's arguments satisfy its tool's parameter schema (a call that does not
validate does not vote).

``ToolStreamFilter`` does the same for a token stream: content streams as it comes, text
from a ``<tool_call>`` marker on is held back and parsed at the end.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Protocol

from services.common.json_constraint import SchemaError, canonical, parse_json_object, validation_errors

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One function call: ``arguments`` is JSON text (canonical when parsed here)."""

    id: str
    name: str
    arguments: str


class HasParameters(Protocol):
    """A tool definition: the proto ``Tool`` and the policy's ``ToolDef`` both fit."""

    @property
    def name(self) -> str: ...

    @property
    def parameters_json(self) -> str: ...


def new_call_id() -> str:
    """An OpenAI-style call id: ``call_`` and 24 hex digits."""
    return "call_" + secrets.token_hex(12)


def canonical_arguments(json_text: str) -> str:
    """Arguments JSON text in canonical form (sorted keys, compact separators).
    ``ValueError`` when it is not a JSON object."""
    value = json.loads(json_text)
    if not isinstance(value, dict):
        raise ValueError(f"tool arguments must be a JSON object, got {type(value).__name__}")
    return canonical(value)


def _call_from(obj: Any) -> ToolCall | None:
    """A call from a decoded ``{"name": .., "arguments": {..}}`` object (``parameters`` is
    accepted for ``arguments``; arguments given as JSON text are decoded)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not obj["name"]:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(id=new_call_id(), name=obj["name"], arguments=canonical(args))


_DECODER = json.JSONDecoder()


def _skip_space(text: str, i: int) -> int:
    while i < len(text) and text[i].isspace():
        i += 1
    return i


def _block_at(text: str, start: int) -> tuple[list[ToolCall], int] | None:
    """The call(s) of the ``<tool_call>`` block opening at ``start`` and where it ends: one
    object, a list of them, or several objects in a row, then ``</tool_call>`` (or the end
    of the text). JSON is decoded, not matched, so a string holding ``</tool_call>`` is fine.
    None when the block holds anything else."""
    i = _skip_space(text, start + len(OPEN))
    values: list[Any] = []
    while i < len(text) and text[i] in "{[":
        try:
            value, i = _DECODER.raw_decode(text, i)
        except ValueError:
            return None
        values.extend(value if isinstance(value, list) else [value])
        i = _skip_space(text, i)
    if not values:
        return None
    if text.startswith(CLOSE, i):
        i += len(CLOSE)
    elif i != len(text):
        return None
    calls = [_call_from(v) for v in values]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None], i


def _bare_calls(text: str, names: Collection[str] | None) -> list[ToolCall] | None:
    """The fallback: the whole reply (optionally in a ``json`` code fence) is a call object or
    a list of them, naming known tools when ``names`` is given."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body.startswith(("{", "[")):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    items = value if isinstance(value, list) else [value]
    calls = []
    for item in items:
        if not isinstance(item, dict) or not ({"arguments", "parameters"} & item.keys()):
            return None
        call = _call_from(item)
        if call is None or (names is not None and call.name not in names):
            return None
        calls.append(call)
    return calls or None


def parse_tool_calls(text: str, names: Collection[str] | None = None) -> tuple[str, list[ToolCall]]:
    """Split generated ``text`` into (content, calls).

    ``<tool_call>`` blocks that hold a call are removed from the content; a block that does
    not parse stays in the content as text. Without blocks, a reply that is only a call
    object (or a list of them) is the fallback; with ``names`` given it must name known tools.
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = pos = 0
    while (start := text.find(OPEN, pos)) != -1:
        block = _block_at(text, start)
        if block is None:
            pos = start + len(OPEN)
            continue
        found, end = block
        kept.append(text[last:start])
        calls.extend(found)
        last = pos = end
    if calls:
        kept.append(text[last:])
        return "".join(kept).strip(), calls
    bare = _bare_calls(text, names)
    if bare is not None:
        return "", bare
    return text, []


def validate_arguments(tool: HasParameters, arguments: str) -> str | None:
    """None when ``arguments`` (JSON text) is an object that validates against ``tool``'s
    parameter schema (an empty schema accepts any object); otherwise why not."""
    try:
        value = json.loads(arguments)
    except ValueError as exc:
        return f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return f"arguments must be a JSON object, got {type(value).__name__}"
    if not tool.parameters_json.strip():
        return None
    try:
        schema = parse_json_object(tool.parameters_json, "parameters schema")
    except SchemaError as exc:
        return str(exc)
    errors = validation_errors(schema, value)
    return "; ".join(errors) if errors else None


def valid_call(call: ToolCall, tools: Collection[HasParameters]) -> bool:
    """The call names one of ``tools`` and its arguments validate against that tool's schema."""
    tool = next((t for t in tools if t.name == call.name), None)
    return tool is not None and validate_arguments(tool, call.arguments) is None


class ToolStreamFilter:
    """Streams content deltas while holding back tool-call syntax.

    ``feed`` returns the text safe to stream now: everything before a ``<tool_call>`` marker
    (a tail that could still become the marker is held back). ``finish`` parses the whole
    text and returns the held-back text that turned out not to be a call, plus the calls.
    """

    def __init__(self, names: Collection[str] | None = None) -> None:
        self.names = names
        self.text = ""
        self.emitted = 0
        self.holding = False

    def feed(self, delta: str) -> str:
        self.text += delta
        if self.holding:
            return ""
        at = self.text.find(OPEN, self.emitted)
        if at != -1:
            self.holding = True
            end = at
        else:
            end = len(self.text)
            for k in range(min(len(OPEN) - 1, len(self.text) - self.emitted), 0, -1):
                if self.text.endswith(OPEN[:k]):
                    end -= k
                    break
            # the bare-JSON fallback can only apply to a reply that starts as JSON
            if not self.text[: self.emitted].strip() and self.text.lstrip().startswith(("{", "[", "```")):
                end = self.emitted
        chunk = self.text[self.emitted : end]
        self.emitted = end
        return chunk

    def finish(self) -> tuple[str, list[ToolCall]]:
        """(text not streamed yet that belongs to the content, calls)."""
        _, calls = parse_tool_calls(self.text, self.names)
        tail = self.text[self.emitted :]
        rest = parse_tool_calls(tail, self.names)[0] if calls else tail
        self.emitted = len(self.text)
        return rest, calls
