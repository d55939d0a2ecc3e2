"""The accuracy ledger: several honest numbers from one candidate pool (PRIMER §2).

Pure functions over per-problem samples. A sample is correct, wrong, or an infrastructure
failure; failures are excluded from every denominator and counted apart, never scored as
wrong answers.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from ``n`` samples with ``c`` correct: 1 - C(n-c, k) / C(n, k).

    Computed as a running product so large ``n`` neither overflows nor loses precision.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c}, n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


@dataclass(frozen=True)
class Sample:
    """One candidate: its normalized answer (``None`` if none was extracted) and verdict."""

    answer: Hashable | None
    correct: bool
    failed: bool = False  # infrastructure failure (timeout, crash, sandbox error)


def majority(samples: Sequence[Sample]) -> Sample | None:
    """The representative of the largest cluster of equal answers.

    Ties go to the cluster whose first member came earliest — a stable, documented rule
    so the same pool always yields the same vote. Samples without an answer do not vote.
    """
    counts: dict[Hashable, int] = {}
    first: dict[Hashable, int] = {}
    for i, s in enumerate(samples):
        if s.failed or s.answer is None:
            continue
        counts[s.answer] = counts.get(s.answer, 0) + 1
        first.setdefault(s.answer, i)
    if not counts:
        return None
    best = min(counts, key=lambda a: (-counts[a], first[a]))
    return samples[first[best]]


@dataclass(frozen=True)
class ProblemLedger:
    """Ledger of one problem: samples plus the answer the system selected."""

    samples: tuple[Sample, ...]
    selected_correct: bool | None = None  # None: the system returned nothing (or failed)

    @property
    def valid(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if not s.failed)


@dataclass(frozen=True)
class LedgerSummary:
    """Aggregates over problems; every rate is over problems with at least one valid sample."""

    problems: int
    scored_problems: int
    failures: int
    pass_at_1: float
    pass_at_k: float
    k: int
    maj_at_k: float
    selected: float
    coverage: float

    def as_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def summarize(problems: Sequence[ProblemLedger], k: int | None = None) -> LedgerSummary:
    """pass@1, unbiased pass@k, maj@k, selected accuracy and coverage over ``problems``.

    ``k`` defaults to the smallest number of valid samples of any problem; problems with
    fewer valid samples than ``k`` use all they have. Coverage is pass@n with every valid
    sample (the oracle: is a right answer anywhere in the pool).
    """
    scored = [p for p in problems if p.valid]
    failures = sum(len(p.samples) - len(p.valid) for p in problems)
    if not scored:
        return LedgerSummary(len(problems), 0, failures, 0.0, 0.0, k or 0, 0.0, 0.0, 0.0)
    k = k or min(len(p.valid) for p in scored)

    def mean(f: Callable[[ProblemLedger], float]) -> float:
        return sum(f(p) for p in scored) / len(scored)

    def correct(p: ProblemLedger) -> int:
        return sum(s.correct for s in p.valid)

    def maj(p: ProblemLedger) -> float:
        winner = majority(p.valid[:k])
        return float(winner is not None and winner.correct)

    return LedgerSummary(
        problems=len(problems),
        scored_problems=len(scored),
        failures=failures,
        pass_at_1=mean(lambda p: correct(p) / len(p.valid)),
        pass_at_k=mean(lambda p: pass_at_k(len(p.valid), correct(p), min(k, len(p.valid)))),
        k=k,
        maj_at_k=mean(maj),
        selected=mean(lambda p: float(bool(p.selected_correct))),
        coverage=mean(lambda p: float(correct(p) > 0)),
    )
