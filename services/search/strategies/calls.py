"""The values of one generation call: the request a strategy makes (:class:`GenRequest`) and
what comes back per candidate (:class:`Generated`). Re-exported by ``context.py``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from services.search.interfaces import Candidate, Message, TextSink
from services.search.strategies.results import Choice
from services.search.trace import TraceNode


def _arguments(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def shown_text(candidate: Candidate) -> str:
    """A candidate as a reader (a verifier, the trace) sees it: its text, then each tool call
    as a ``<tool_call>`` block in the Hermes/Qwen syntax."""
    calls = [
        "<tool_call>\n"
        + json.dumps({"name": c.name, "arguments": _arguments(c.arguments)}, ensure_ascii=False)
        + "\n</tool_call>"
        for c in candidate.tool_calls
    ]
    return "\n".join([candidate.text, *calls]) if calls else candidate.text


@dataclass(frozen=True)
class GenRequest:
    """One batched generation: ``n`` candidates of one prompt/prefix."""

    n: int
    parent_id: str
    action: str = "generate"
    assistant_prefix: str = ""
    messages: Sequence[Message] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: Sequence[str] | None = None
    logprobs: bool = False
    offer: bool = True
    shaped: bool = True  # a visible answer: the job's tools, constraint and logprobs apply
    on_text: TextSink | None = None  # stream the text (n == 1) as the answer, as the engine generates it
    #: what the candidates are called in the reasoning stream ("program" → "program 1",
    #: "program 2", ...; one ending in "." joins without a space: "beam 2." → "beam 2.1");
    #: "" names them by ``action``
    source: str = ""
    answer: bool = False  # the call decodes the reply itself: its tokens are the answer, not reasoning


@dataclass(frozen=True)
class Generated:
    """A candidate together with the trace node that records it."""

    node: TraceNode
    candidate: Candidate

    @property
    def text(self) -> str:
        return self.candidate.text

    @property
    def shown(self) -> str:
        """The text with its tool calls rendered (what a verifier judges)."""
        return shown_text(self.candidate)

    def choice(self, **fields: float | bool | int) -> Choice:
        """This candidate as an answer: exactly one sampled candidate, with its tool calls and
        token logprobs (``fields``: score, passed, scored, votes, answer_tokens)."""
        c = self.candidate
        choice = Choice(c.text, self.node.id, c.finish_reason, c.completion_tokens, tool_calls=c.tool_calls)
        choice.tokens, choice.sampled = c.tokens, True
        for name, value in fields.items():
            setattr(choice, name, value)
        return choice
