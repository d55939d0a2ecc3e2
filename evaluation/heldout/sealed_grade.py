"""A reply to a sealed problem graded by reasoning-gym's own checker, on the entry the split stored.

Each sealed problem keeps its generator's entry (``rg_entry``: the reference answer and the
metadata the checker reads), so a reply is graded exactly as reasoning-gym grades its own
families: ``score_answer(answer, entry)`` of a dataset built from that family's default
configuration, the one the split was generated with. The checker gives partial credit on some
families (a formatted but wrong answer, a near miss); a reply counts as right only with a
grade of exactly 1.0.

The answer handed to the checker is read from the reply three ways, all of the same text: the
whole content (the gateway renders the answer in the form the question asks, so the content is
often the answer itself, a grid or a list included), the answer it states (``\\boxed{}``, "the
answer is ...": :func:`~services.common.answers.extract_answer`) and its last fenced block. The
grade is the best of them; no spelling is changed (no lower-casing, no unit stripping).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from evaluation.problems.sealed import SEALED_SEED, SealedProblem
from services.common.answers import extract_answer, extract_code

RIGHT = 1.0


@dataclass(frozen=True)
class Grade:
    """The checker's score of a reply (in [0, 1]) and the reading of it that scored it."""

    score: float
    answer: str

    @property
    def correct(self) -> bool:
        """Exactly right: partial credit is wrong."""
        return self.score >= RIGHT


@cache
def scorer(family: str) -> Any:
    """The family's reasoning-gym dataset in its default configuration: its ``score_answer``."""
    import reasoning_gym

    return reasoning_gym.create_dataset(family, seed=SEALED_SEED, size=1)


def readings(content: str) -> list[str]:
    """The answers a reply can be read as (module docstring), each once, in that order."""
    found = [content.strip(), extract_answer(content) or "", extract_code(content, language=None) or ""]
    return [text for text in dict.fromkeys(t.strip() for t in found) if text]


def grade(problem: SealedProblem, content: str) -> Grade:
    """The best checker score over the reply's readings; a checker that chokes on a reading
    scores it 0 (an odd answer is wrong, never a crash)."""
    entry = json.loads(problem.rg_entry)
    check = scorer(problem.family)
    best = Grade(0.0, "")
    for answer in readings(content):
        try:
            score = float(check.score_answer(answer, entry))
        except Exception:  # reasoning-gym checkers raise on malformed answers
            score = 0.0
        if score > best.score:
            best = Grade(min(1.0, score), answer)
    return best
