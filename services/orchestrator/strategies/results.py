"""What a strategy answers: a :class:`Choice` (the answer it would return now) and an
:class:`Outcome` (its final choice and why it stopped)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Termination = Literal["solved", "budget", "deadline", "error", "completed", "cancelled"]


@dataclass
class Choice:
    """An answer a strategy would return now. ``scored`` is False until a verifier judged it."""

    text: str
    node_id: str
    finish_reason: str = "stop"
    answer_tokens: int = 0
    score: float = 0.0
    passed: bool = False
    scored: bool = False

    def rank(self) -> tuple[bool, bool, float]:
        return (self.scored, self.passed, self.score)


@dataclass(frozen=True)
class Outcome:
    choice: Choice | None
    termination: Termination = "completed"
