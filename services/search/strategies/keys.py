"""Vote keys: what makes two candidates the same answer.

- A candidate with tool calls votes under its normalized calls: each call's name and canonical
  JSON arguments (sorted keys, compact), the calls of one turn as an order-insensitive
  (sorted) list, so parallel calls in any order agree. A call that names no offered tool or
  whose arguments do not validate against the tool's parameters schema makes the candidate
  abstain (key ``""``), as do several calls when parallel calls were not allowed.
- With a response format, a candidate votes under its canonical JSON (a candidate that is not
  JSON, or not an object for ``json_object``, or fails the schema, abstains).
- Otherwise the extracted, normalized answer (:func:`services.common.answers.normalize_for_vote`).

The three kinds carry distinct prefixes, so a tool call never votes with a text answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from services.common.answers import normalize_for_vote
from services.common.json_constraint import canonical, validation_errors
from services.common.tool_calls import validate_arguments
from services.search.interfaces import Candidate, Constraint, ToolCall, Tools

TOOL_CALLS_PREFIX = "tool_calls:"
JSON_PREFIX = "json:"


def calls_key(calls: Sequence[ToolCall], tools: Tools | None) -> str:
    """The normalized calls of one turn, ``""`` when any call is not a valid call of ``tools``."""
    offered = {t.name: t for t in tools.tools} if tools is not None else {}
    if tools is not None and not tools.parallel and len(calls) > 1:
        return ""  # parallel calls were not allowed
    normalized = []
    for call in calls:
        tool = offered.get(call.name)
        if tool is None or validate_arguments(tool, call.arguments) is not None:
            return ""
        normalized.append([call.name, json.loads(call.arguments)])
    normalized.sort(key=canonical)
    return TOOL_CALLS_PREFIX + canonical(normalized)


def json_key(text: str, constraint: Constraint) -> str:
    """Canonical JSON of ``text``, ``""`` when it is not what the constraint asks for."""
    try:
        value = json.loads(text)
    except ValueError:
        return ""
    if constraint.json_schema:
        try:
            schema = json.loads(constraint.json_schema)
        except ValueError:
            return ""
        if not isinstance(schema, dict) or validation_errors(schema, value, limit=1):
            return ""
    elif not isinstance(value, dict):
        return ""
    return JSON_PREFIX + canonical(value)


@dataclass(frozen=True)
class VoteKeys:
    """The job's vote-key rule (its tools and its output constraint)."""

    tools: Tools | None = None
    constraint: Constraint | None = None

    def key(self, candidate: Candidate, *, decimals: int | None = None) -> str:
        if candidate.tool_calls:
            return calls_key(candidate.tool_calls, self.tools)
        if self.constraint is not None:
            return json_key(candidate.text, self.constraint)
        if self.tools is not None and self.tools.choice not in ("auto", ""):
            return ""  # a call was required: a text reply does not vote
        return normalize_for_vote(candidate.text, decimals=decimals)

    @property
    def structured(self) -> bool:
        """Whether answers are compared as structures (tools or a response format)."""
        return self.tools is not None or self.constraint is not None
