"""Tool calls out of generated text, for whole candidates and for streams (pure).

Engines that generate text themselves (llama.cpp, vLLM) return the model's raw text; when the
request gave tools (and tool_choice is not "none"), the servicer splits it here into content
and calls. An engine that already returns calls (a remote OpenAI server parses its own) is
left as it is.
"""

from __future__ import annotations

from services.common.tool_calls import ToolCall, ToolStreamFilter, parse_tool_calls
from services.gen.ttc.v1 import common_pb2
from services.policy.engines.base import Generation, Prompt, StreamDelta


def _names(prompt: Prompt) -> list[str] | None:
    return [t.name for t in prompt.tools.tools] if prompt.tools is not None and prompt.tools.active else None


def attach_tool_calls(gen: Generation, prompt: Prompt) -> None:
    """Parse each candidate's text into content and calls (in place)."""
    names = _names(prompt)
    if names is None:
        return
    for c in gen.completions:
        if not c.tool_calls:
            c.text, c.tool_calls = parse_tool_calls(c.text, names)


class StreamToolCalls:
    """Per-candidate stream filters: content streams, call syntax is held back and comes out
    as the final delta's ``tool_calls``."""

    def __init__(self, prompt: Prompt) -> None:
        self.names = _names(prompt)
        self.filters: dict[int, ToolStreamFilter] = {}

    def __call__(self, delta: StreamDelta) -> StreamDelta:
        if self.names is None or delta.tool_calls:
            return delta
        f = self.filters.setdefault(delta.index, ToolStreamFilter(self.names))
        text = f.feed(delta.text)
        calls: list[ToolCall] = []
        if delta.finish_reason is not None:
            rest, calls = f.finish()
            text += rest
        return StreamDelta(delta.index, text, delta.finish_reason, delta.completion_tokens, calls)


def tool_calls_pb(calls: list[ToolCall]) -> list[common_pb2.ToolCall]:
    return [common_pb2.ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls]
