"""Adaptive early stopping for sampling strategies (pure: counts in, a decision out).

Sampling strategies draw in waves and ask, after each wave, whether more samples could still
change the winner. Two rules, either one stops:

- **Decided**: the leader's lead over the runner-up exceeds the votes still to be drawn, so no
  outcome of the remaining draws can change the winner (exact, costs no accuracy).
- **Confident** (Adaptive-Consistency, Aggarwal et al. 2023): with a uniform prior on the
  share ``p`` of the leader among the two strongest answers, the posterior after ``a`` leader
  and ``b`` runner-up votes is Beta(a+1, b+1); stop once P(p > 1/2) >= ``confidence``. For
  integer parameters this is a binomial tail, ``P(Binomial(a+b+1, 1/2) <= a)``.

Weighted votes (hybrid program/chain-of-thought voting) use the weights as pseudo-counts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass


def leader_probability(leader: float, runner_up: float) -> float:
    """P(the leader's true share beats the runner-up's) under Beta(leader+1, runner_up+1).

    Non-integer (weighted) counts are rounded down for the leader and up for the runner-up,
    which can only make the rule more cautious."""
    a = max(0, math.floor(leader + 1e-9))
    b = max(0, math.ceil(runner_up - 1e-9))
    trials = a + b + 1
    tail = sum(math.comb(trials, k) for k in range(a + 1))
    return float(tail / 2**trials)


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    reason: str  # "decided", "confident" or "" when sampling continues
    leader: str
    probability: float


def should_stop(votes: Mapping[str, float], remaining: float, confidence: float) -> StopDecision:
    """Whether to stop drawing, given the vote weight per answer key and the weight of the
    votes still to come. Keys that are ``""`` (no answer) never count."""
    ranked = sorted(((w, k) for k, w in votes.items() if k), reverse=True)
    if not ranked:
        return StopDecision(False, "", "", 0.0)
    leader_weight, leader = ranked[0]
    runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
    probability = leader_probability(leader_weight, runner_up)
    if leader_weight - runner_up > remaining:
        return StopDecision(True, "decided", leader, probability)
    if probability >= confidence:
        return StopDecision(True, "confident", leader, probability)
    return StopDecision(False, "", leader, probability)


def wave_sizes(total: int, first: int, growth: int = 2) -> list[int]:
    """Wave sizes that sum to ``total``: ``first``, then growing ``growth`` times each wave (fewer, larger
    engine calls keep batching efficient while still allowing an early stop)."""
    sizes: list[int] = []
    size = max(1, first)
    while sum(sizes) < total:
        sizes.append(min(size, total - sum(sizes)))
        size *= max(1, growth)
    return sizes
