"""The chat value types, written once: the search library's strategies and the policy's
engines both speak these (a turn, its tool calls, the tools a request may call).

Plain frozen dataclasses with no protobuf, so the pure search library and the engines share
them without either importing the other; each side translates to and from ttc.v1 itself
(``services/search/shapes.py``, ``services/policy/servicer.py``). ``ToolCall`` is the one in
``services/common/tool_calls.py``, where calls are parsed from text.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.common.tool_calls import ToolCall

__all__ = ["Message", "Tool", "ToolCall", "Tools"]


@dataclass(frozen=True)
class Message:
    """A chat turn. Assistant turns may carry ``tool_calls``; tool turns answer the call
    ``tool_call_id`` (of function ``name``)."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""


@dataclass(frozen=True)
class Tool:
    """A function the model may call; ``parameters_json`` is its arguments' JSON schema ("" = any object)."""

    name: str
    description: str = ""
    parameters_json: str = ""
    strict: bool = False


@dataclass(frozen=True)
class Tools:
    """A request's tools (ttc.v1.ToolSpec) and OpenAI's tool_choice: "auto", "none",
    "required" or the name of one tool; ``parallel`` allows several calls in one turn."""

    tools: tuple[Tool, ...] = ()
    choice: str = "auto"
    parallel: bool = True

    @property
    def active(self) -> bool:
        """Tools are rendered and calls parsed (any choice but "none")."""
        return bool(self.tools) and self.choice != "none"

    @property
    def forced(self) -> tuple[Tool, ...]:
        """The tools one of which must be called ("required" or a named tool), else ()."""
        if self.choice == "required":
            return self.tools
        return tuple(t for t in self.tools if t.name == self.choice)
