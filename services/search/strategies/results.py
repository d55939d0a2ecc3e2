"""What a strategy answers: a :class:`Choice` (the answer it would return now) and an
:class:`Outcome` (its final choice and why it stopped)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from services.common.confidence import ConfidenceSignals
from services.search.interfaces import TokenLogprob, ToolCall

Termination = Literal["solved", "budget", "deadline", "error", "completed", "cancelled"]


@dataclass
class Choice:
    """An answer a strategy would return now. ``scored`` is False until a verifier judged it.

    ``sampled`` says the text is exactly one sampled candidate (not a combination of steps, a
    forced prefix plus a continuation, or a rendered program): only then are ``tokens`` (its
    token logprobs) the answer's. ``votes`` counts the candidates that agreed with it. ``text``
    is what the strategy produced (a chain of thought, or a program with its output), the
    evidence; what the reply shows is rendered from it (``services/search/presentation.py``).
    ``signals`` is what the strategy's final vote says about the answer (vote share, votes,
    abstentions, ...: :mod:`~.signals`), from which the result's calibrated ``confidence`` is
    computed; ``None`` where the strategy has no such signal (the confidence is then absent)."""

    text: str
    node_id: str
    finish_reason: str = "stop"
    answer_tokens: int = 0
    score: float = 0.0
    passed: bool = False
    scored: bool = False
    tool_calls: tuple[ToolCall, ...] = ()
    tokens: tuple[TokenLogprob, ...] = ()
    sampled: bool = False
    votes: int = 0
    # The answer's value when the strategy knows it exactly (a program's printed answer); ""
    # when it is read out of ``text``. The reply renders it in the form the question asked for.
    answer: str = ""
    # What chose this text that the text does not show (code by execution: the inputs it ran and
    # the behaviour clusters). The reply's reasoning where the text itself is the content (code).
    evidence: str = ""
    signals: ConfidenceSignals | None = None

    def rank(self) -> tuple[bool, bool, float]:
        return (self.scored, self.passed, self.score)


@dataclass(frozen=True)
class Outcome:
    choice: Choice | None
    termination: Termination = "completed"


@dataclass
class Course:
    """How an adaptive vote spent its compute (``SearchResult.adaptive``): the first wave's size,
    whether it alone settled the vote, each later step, and why it stopped ("" while running)."""

    first_wave: int
    first_wave_settled: bool = False
    steps: list[str] = field(default_factory=list)
    stopped: str = ""
