"""The intervals every report quotes: Wilson for proportions, a bootstrap that cannot collapse."""

import pytest

from evaluation.stats.intervals import bootstrap_interval, wilson


def test_wilson_is_inside_0_1_and_contains_the_estimate() -> None:
    assert wilson(0, 10)[0] == 0.0 and 0.0 < wilson(0, 10)[1] < 0.35
    assert wilson(10, 10)[1] == pytest.approx(1.0) and wilson(10, 10)[0] > 0.65
    low, high = wilson(7, 15)
    assert low < 7 / 15 < high
    assert wilson(0, 0) == (0.0, 0.0)


def test_wilson_takes_a_fractional_count() -> None:
    low, high = wilson(7.5, 15)
    assert low < 0.5 < high
    assert wilson(7, 15)[0] < low and wilson(8, 15)[1] > high


def test_bootstrap_interval_brackets_the_mean() -> None:
    values = [0.0, 1.0] * 20
    low, high = bootstrap_interval(values, seed=1)
    assert low < 0.5 < high


def test_every_problem_alike_still_leaves_the_uncertainty_of_few_problems() -> None:
    """12 of 12 right is not certainty: the interval is Wilson's, not the bootstrap's [1, 1]."""
    assert bootstrap_interval([1.0] * 12) == pytest.approx(wilson(12, 12))
    assert bootstrap_interval([1.0] * 12)[0] < 0.8
    assert bootstrap_interval([0.0] * 12)[1] > 0.2


def test_many_problems_narrow_the_interval() -> None:
    few = bootstrap_interval([0.0, 1.0] * 5, seed=2)
    many = bootstrap_interval([0.0, 1.0] * 500, seed=2)
    assert many[1] - many[0] < (few[1] - few[0]) / 5
