"""The problems no export may contain: the development split and the sealed test split.

A model fine-tuned on a problem it is later measured on measures nothing, so the rule is checked
by content, not by trusting a pool's ``split`` field: a question is withheld when its content
hash (:func:`~evaluation.problems.sealed.text_hash`, whitespace-normalized sha256) is one of the
development problems' (every development pool's questions, and any pool problem the split function
:func:`~evaluation.problems.datasets.split_of` puts on the development side) or the sealed split's
(:func:`~evaluation.problems.sealed.sealed_hashes`). A served prompt is also withheld when it
contains a withheld question inside a longer text (a question sent with a preamble).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from evaluation.pools.store import ProblemPool, iter_chunks, latest_pools
from evaluation.problems.datasets import split_of
from evaluation.problems.sealed import load_sealed, sealed_hashes, text_hash

DEVELOPMENT = "development_split"
SEALED = "sealed_split"
#: shorter questions are matched by hash only: a short one ("What is 2 + 2?") inside a longer
#: prompt says nothing about which problem the prompt is
MIN_CONTAINED_CHARS = 40


def _normalized(text: str) -> str:
    return " ".join(text.split()).lower()


def in_development(pool: ProblemPool) -> bool:
    """Whether a pool's problem is on the development side, by its pool or by the split function."""
    return pool.split != "calibration" or split_of(pool.id) != "calibration"


@dataclass(frozen=True)
class Withheld:
    """Content hashes of the development and sealed questions, and their normalized texts where
    known (for the containment check of served prompts)."""

    development: frozenset[str]
    sealed: frozenset[str]
    texts: tuple[tuple[str, str], ...] = ()  # (reason, normalized question)

    @classmethod
    def build(
        cls, development_pools: Iterable[ProblemPool], sealed: frozenset[str], sealed_questions: Iterable[str] = ()
    ) -> Withheld:
        questions = [str(p.problem["question"]) for p in development_pools]
        texts = [(DEVELOPMENT, _normalized(q)) for q in questions]
        texts += [(SEALED, _normalized(q)) for q in sealed_questions]
        long_enough = tuple((r, t) for r, t in texts if len(t) >= MIN_CONTAINED_CHARS)
        return cls(frozenset(text_hash(q) for q in questions), sealed, long_enough)

    def reason(self, question: str) -> str | None:
        """Why ``question`` may not be exported (:data:`DEVELOPMENT`, :data:`SEALED`), or ``None``."""
        digest = text_hash(question)
        if digest in self.sealed:
            return SEALED
        if digest in self.development:
            return DEVELOPMENT
        return None

    def prompt_reason(self, texts: Iterable[str]) -> str | None:
        """As :meth:`reason`, for a served prompt's messages: any message's hash, or a withheld
        question contained in one."""
        texts = list(texts)
        for text in texts:
            if (why := self.reason(text)) is not None:
                return why
        normalized = [_normalized(t) for t in texts]
        for why, question in self.texts:
            if any(question in t for t in normalized):
                return why
        return None


def withheld_of(pool_folders: Iterable[Path], sealed_path: Path) -> Withheld:
    """What no export or training may read: every development pool's question in ``pool_folders``
    and the sealed split at ``sealed_path``."""
    pools = [pool for folder in pool_folders for pool, _ in latest_pools(iter_chunks(folder)).values()]
    development = (pool for pool in pools if pool.split != "calibration")
    return Withheld.build(development, sealed_hashes(sealed_path), (p.question for p in load_sealed(sealed_path)))
