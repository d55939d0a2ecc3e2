"""Adaptive early stopping: the Beta criterion and the exact "decided" rule."""

from __future__ import annotations

import math

import pytest

from services.search.strategies.stopping import leader_probability, should_stop, wave_sizes


def beta_tail_by_integration(a: int, b: int, steps: int = 20000) -> float:
    """P(X > 1/2) for X ~ Beta(a+1, b+1), by the midpoint rule (independent of the closed form)."""
    norm = math.gamma(a + b + 2) / (math.gamma(a + 1) * math.gamma(b + 1))
    h = 0.5 / steps
    return sum(norm * (0.5 + (i + 0.5) * h) ** a * (0.5 - (i + 0.5) * h) ** b * h for i in range(steps))


@pytest.mark.parametrize(("a", "b"), [(0, 0), (3, 0), (4, 1), (5, 3), (2, 2), (10, 4)])
def test_leader_probability_is_the_beta_tail(a: int, b: int) -> None:
    assert leader_probability(a, b) == pytest.approx(beta_tail_by_integration(a, b), abs=1e-6)


def test_a_tie_is_a_coin_flip() -> None:
    assert leader_probability(3, 3) == pytest.approx(0.5)


def test_weighted_counts_are_rounded_cautiously() -> None:
    assert leader_probability(2.5, 0.5) == leader_probability(2, 1)


def test_unanimous_three_is_confident_at_0_9_but_not_at_0_95() -> None:
    assert should_stop({"42": 3}, remaining=5, confidence=0.9).reason == "confident"
    assert not should_stop({"42": 3}, remaining=5, confidence=0.95).stop


def test_decided_when_the_lead_exceeds_what_is_left() -> None:
    decision = should_stop({"7": 4, "8": 1}, remaining=2, confidence=0.999)
    assert decision.stop and decision.reason == "decided" and decision.leader == "7"


def test_split_votes_continue_and_abstentions_never_lead() -> None:
    assert not should_stop({"1": 1, "2": 1, "3": 1}, remaining=5, confidence=0.9).stop
    assert not should_stop({"": 5}, remaining=3, confidence=0.5).stop


@pytest.mark.parametrize(("total", "first", "expected"), [(8, 3, [3, 5]), (16, 4, [4, 8, 4]), (4, 4, [4]), (1, 3, [1])])
def test_wave_sizes_cover_the_total(total: int, first: int, expected: list[int]) -> None:
    assert wave_sizes(total, first) == expected
