"""The difficulty estimator: the ridge recovers a signal, bins follow the table's rules."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.routing.difficulty import difficulty_bin, fit_ridge, quantile_edges, strictly_rising

EDGES = [("easy", 0.34), ("medium", 0.67), ("hard", 1.0)]


def test_ridge_recovers_a_linear_signal() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = np.clip(0.5 + 0.2 * x[:, 0] - 0.1 * x[:, 3], 0, 1)
    model = fit_ridge(x[:150], y[:150], alpha=1.0)
    assert float(np.corrcoef(model.predict(x[150:]), y[150:])[0, 1]) > 0.9
    with pytest.raises(ValueError):
        fit_ridge(x[:1], y[:1])


def test_bins_hold_equal_shares_and_end_at_one() -> None:
    edges = quantile_edges(np.linspace(0.0, 0.9, 9), ["easy", "medium", "hard"])
    assert [name for name, _ in edges] == ["easy", "medium", "hard"] and edges[-1][1] == 1.0
    assert edges[0][1] == pytest.approx(0.3) and edges[1][1] == pytest.approx(0.6)


def test_edges_are_clipped_and_never_fall() -> None:
    assert strictly_rising([("easy", -0.2), ("medium", 0.5), ("hard", 0.7)]) == [
        ("easy", 0.0), ("medium", 0.5), ("hard", 1.0)
    ]  # fmt: skip
    assert strictly_rising([("easy", 0.6), ("medium", 0.4), ("hard", 0.2)]) == [
        ("easy", 0.6), ("medium", 0.6), ("hard", 1.0)
    ]  # fmt: skip


def test_a_difficulty_falls_in_the_first_bin_it_does_not_pass() -> None:
    assert [difficulty_bin(d, EDGES) for d in (0.0, 0.34, 0.35, 0.9, 1.2)] == [
        "easy", "easy", "medium", "hard", "hard"
    ]  # fmt: skip
