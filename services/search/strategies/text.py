"""Small text helpers the strategies share."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from services.common.answers import extract_boxed
from services.search.interfaces import Message

_FINAL_MARKER = re.compile(r"answer is|final answer|####", re.IGNORECASE)


def states_final_answer(text: str) -> bool:
    """Whether a step states the final answer (ends a step-level search path)."""
    return extract_boxed(text) is not None or _FINAL_MARKER.search(text) is not None


def question_text(problem: Sequence[Message]) -> str:
    """The last user (or raw prompt) text: where a question states what it asks for."""
    for message in reversed(problem):
        if message.role in ("user", "raw"):
            return message.content
    return ""


def safe_mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else 0.0
