"""The difficulty estimator's features: one function, used by calibration and by the gateway.

A ridge fitted on one feature layout and served on another predicts nonsense without any
error, so the layout lives here only: ``evaluation`` imports ``difficulty_features``
to fit, the gateway imports it to serve, and ``FEATURE_SET`` names the layout in the routing
table, which the gateway checks at start-up. Change the layout → change ``FEATURE_SET``.

Features: the prompt's MiniLM embedding (384 values), then cheap counts that the embedding
blurs - how many numbers, the longest number's digits, operators between numbers, words
(each ``log1p``, so a 400-word prompt does not dominate the standardization) - then the task
type as one-hot (a code prompt and a sum of the same length are not equally hard).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from services.common.embedding import DIM as EMBEDDING_DIM
from services.common.task_type import FEATURE_TASK_TYPES, classify_task, feature_task

FEATURE_SET = "minilm-l6-v2-mean+text-v1"
TEXT_FEATURES = ("log1p_numbers", "log1p_max_digits", "log1p_operators", "log1p_words")
FEATURE_NAMES: tuple[str, ...] = (
    *(f"embedding_{i}" for i in range(EMBEDDING_DIM)),
    *TEXT_FEATURES,
    *(f"task_{t}" for t in FEATURE_TASK_TYPES),
)
FEATURE_DIM = len(FEATURE_NAMES)

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_OPERATOR = re.compile(r"(?<=[\d)\s])(?:\*\*|[-+*/\u00d7\u00f7^%])(?=\s*[-(]?\d)")  # \u00d7 \u00f7: times, divide
_WORD = re.compile(r"\w+")


def estimation_text(messages: Sequence[tuple[str, str]], prompt: str) -> str:
    """The text difficulty and task type are read from: the last user message (what
    calibration embeds as the problem's question; a system prompt says how to answer, not how
    hard the question is), else the raw completion prompt, else every message."""
    for role, text in reversed(messages):
        if role == "user" and text.strip():
            return text
    return prompt if prompt.strip() else "\n".join(text for _, text in messages)


def text_features(text: str) -> np.ndarray:
    """The cheap counts (``TEXT_FEATURES``), log1p-scaled."""
    numbers = _NUMBER.findall(text)
    max_digits = max((sum(c.isdigit() for c in n) for n in numbers), default=0)
    counts = (len(numbers), max_digits, len(_OPERATOR.findall(text)), len(_WORD.findall(text)))
    return np.array([math.log1p(c) for c in counts], dtype=np.float64)


def difficulty_features(embedding: np.ndarray, text: str) -> np.ndarray:
    """One feature row (``FEATURE_NAMES``) from the text's embedding and the text."""
    if embedding.shape != (EMBEDDING_DIM,):
        raise ValueError(f"expected a {EMBEDDING_DIM}-d embedding, got shape {embedding.shape}")
    task = feature_task(classify_task(text))  # the layout the ridge was fitted on
    one_hot = np.array([1.0 if t == task else 0.0 for t in FEATURE_TASK_TYPES])
    return np.concatenate([embedding.astype(np.float64), text_features(text), one_hot])
