"""The tuned model against the base on the same problems, read from pools (pure): greedy
against greedy, and greedy against the base's vote at the same generated tokens.

A side is a pool folder's problems (:mod:`evaluation.pools.store`): the calibration pools of the
base, or what ``python -m calibration train eval draw`` drew (the greedy answers, and ``k``
sampled ones where a vote is wanted). Per kind of answer:

- ``program``: the greedy program-of-thought program, right when what it printed is right and it
  computed it (a program that prints a literal is not credited: the served strategy's rule,
  :func:`~services.search.strategies.program_checks.program_vote`, gives it no vote);
- ``cot``: the greedy chain of thought's extracted answer;
- ``code``: the greedy completion against the hidden tests.

The budget-matched comparison prices the base's vote as served (:mod:`evaluation.pricing.pricer`:
``pot`` for programs, a greedy program then sampled ones, falling back to the greedy chain of
thought; ``sc`` for chains of thought; ``code_vote`` for code) at every ``n`` its pool allows,
and mixes the two ``n`` whose mean generated tokens bracket the tuned model's greedy mean, so
that the mixture spends exactly as many tokens on average. Where the tuned greedy answer is
shorter than the base's cheapest vote, the base gets its cheapest vote (it spends more).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from evaluation.pools.store import ProblemPool
from evaluation.pricing.pricer import Config, Family, LatencyModel, Pricer
from evaluation.training.paired import Paired, paired

Kind = Literal["program", "cot", "code"]
KINDS: tuple[Kind, ...] = ("program", "cot", "code")
VOTE: dict[Kind, Family] = {"program": "pot", "cot": "sc", "code": "code_vote"}


def greedy_right(pool: ProblemPool, kind: Kind) -> bool | None:
    """Whether the pool's greedy answer of ``kind`` is right (module docstring); ``None`` when
    the pool has no such answer or its check failed for an infrastructure reason."""
    draw = pool.draws.get(kind)
    greedy = draw.greedy if draw is not None else None
    if greedy is None or greedy.correct is None:
        return None
    if kind == "program":
        return greedy.correct and bool(greedy.key)
    return greedy.correct


def greedy_outcomes(pools: Sequence[ProblemPool], kind: Kind) -> tuple[dict[str, float], dict[str, int]]:
    """Problem id -> 1.0 or 0.0 for the greedy answer of ``kind``, and -> its completion tokens."""
    right: dict[str, float] = {}
    tokens: dict[str, int] = {}
    for pool in pools:
        verdict = greedy_right(pool, kind)
        greedy = pool.draws[kind].greedy if verdict is not None else None
        if greedy is not None:
            right[pool.id] = float(bool(verdict))
            tokens[pool.id] = greedy.completion_tokens
    return right, tokens


@dataclass(frozen=True)
class VotePoint:
    """The base's vote of ``n`` on the problems: per-problem expected accuracy and tokens."""

    n: int
    accuracy: dict[str, float]
    generated: dict[str, float]

    def mean_generated(self, problems: Sequence[str]) -> float:
        return sum(self.generated[p] for p in problems) / len(problems)


def vote_curve(pools: Sequence[ProblemPool], kind: Kind, problems: Sequence[str]) -> list[VotePoint]:
    """The base's vote priced at every ``n`` that every one of ``problems`` allows (1 up to the
    smallest pool's sampled count; for ``pot`` the greedy program counts as one of ``n``)."""
    by_id = {p.id: p for p in pools if p.id in set(problems)}
    if set(problems) - set(by_id):
        return []
    sampled = min(len(by_id[p].draws[kind].sampled) if kind in by_id[p].draws else 0 for p in problems)
    top = sampled + 1 if kind == "program" else sampled
    pricer = Pricer(LatencyModel())
    curve = []
    for n in range(1, top + 1):
        config = Config(f"{VOTE[kind]}@{n}", VOTE[kind], n=n)
        estimates = {p: pricer.estimate(by_id[p], config) for p in problems}
        if any(e is None for e in estimates.values()):
            break
        curve.append(VotePoint(n, {p: e.accuracy for p, e in estimates.items() if e is not None},
                               {p: e.generated for p, e in estimates.items() if e is not None}))  # fmt: skip
    return curve


@dataclass(frozen=True)
class Matched:
    """The base's vote mixed to a token budget: ``weight`` of ``high`` and the rest of ``low``."""

    low: int
    high: int
    weight: float
    generated: float
    accuracy: dict[str, float]


def budget_matched(curve: Sequence[VotePoint], budget: float, problems: Sequence[str]) -> Matched:
    """The mixture of two neighbouring points of ``curve`` whose mean generated tokens equal
    ``budget`` (clamped to the curve's ends: the cheapest vote when the budget is below it)."""
    if not curve:
        raise ValueError("no vote to match")
    means = [point.mean_generated(problems) for point in curve]
    low = 0
    while low + 1 < len(curve) and means[low + 1] <= budget:
        low += 1
    high = min(low + 1, len(curve) - 1)
    span = means[high] - means[low]
    weight = 0.0 if high == low or span <= 0 else min(1.0, max(0.0, (budget - means[low]) / span))
    a, b = curve[low], curve[high]
    accuracy = {p: (1 - weight) * a.accuracy[p] + weight * b.accuracy[p] for p in problems}
    return Matched(a.n, b.n, weight, (1 - weight) * means[low] + weight * means[high], accuracy)


@dataclass(frozen=True)
class KindComparison:
    """One kind of answer on one split: tuned greedy against base greedy, and against the base's
    vote at the tuned model's tokens (``None`` when the base side has no samples to vote)."""

    kind: Kind
    tuned_tokens: float
    base_tokens: float
    greedy: Paired
    vote: Paired | None
    matched: Matched | None

    def to_dict(self) -> dict[str, Any]:
        vote = None
        if self.vote is not None and self.matched is not None:
            m = self.matched
            vote = {**self.vote.to_dict(), "n_low": m.low, "n_high": m.high, "weight_high": round(m.weight, 4),
                    "base_generated": round(m.generated, 1)}  # fmt: skip
        return {"kind": self.kind, "tuned_tokens": round(self.tuned_tokens, 1),
                "base_tokens": round(self.base_tokens, 1), "greedy": self.greedy.to_dict(), "vote": vote}  # fmt: skip


def compare(tuned: Sequence[ProblemPool], base: Sequence[ProblemPool], kind: Kind,
            vote_pools: Sequence[ProblemPool] = ()) -> KindComparison | None:  # fmt: skip
    """``kind`` on the problems both sides answered greedily (``None`` when there is none); the
    vote from ``vote_pools`` (the base's pools with samples) when given."""
    tuned_right, tuned_tokens = greedy_outcomes(tuned, kind)
    base_right, base_tokens = greedy_outcomes(base, kind)
    problems = sorted(set(tuned_right) & set(base_right))
    if not problems:
        return None
    budget = mean(tuned_tokens, problems)
    vote = matched = None
    curve = vote_curve(vote_pools, kind, problems) if vote_pools else []
    if curve:
        matched = budget_matched(curve, budget, problems)
        vote = paired({p: tuned_right[p] for p in problems}, matched.accuracy)
    greedy = paired({p: tuned_right[p] for p in problems}, {p: base_right[p] for p in problems})
    return KindComparison(kind, budget, mean(base_tokens, problems), greedy, vote, matched)


def mean(values: Mapping[str, float], keys: Sequence[str]) -> float:
    return sum(values[k] for k in keys) / len(keys)
