"""Calibration: estimator fit, routes within budget, held-out evaluation charged its probe."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.calibration import (
    ConfigStats,
    ProblemStats,
    agreement_difficulty,
    choose_routes,
    effort_budgets,
    evaluate_adaptive,
    evaluate_fixed,
    fit_ridge,
    problem_stats,
    spearman,
    verdict,
)
from tests.unit.evaluation.test_report import rec

EDGES = [("easy", 0.34), ("medium", 0.67), ("hard", 1.0)]


def stats(pid: str, probe: float, single: float, sc: float) -> ProblemStats:
    s = ProblemStats(pid, pid, 1, probe_difficulty=probe)
    s.configs = {"single": ConfigStats(single, 100, 1), "self_consistency:n=4": ConfigStats(sc, 400, 1)}
    return s


def test_routes_spend_where_it_pays_and_respect_budgets() -> None:
    easy = [stats(f"e{i}", 0.0, 1.0, 1.0) for i in range(4)]
    medium = [stats(f"m{i}", 0.5, 0.0, 1.0) for i in range(4)]
    pool = easy + medium
    bins = {s.problem_id: ("easy" if s.problem_id[0] == "e" else "medium") for s in pool}
    budgets = effort_budgets(pool, "single", {"low": 1.0, "high": 8.0})
    routes = choose_routes(pool, bins, EDGES, budgets)
    assert routes["low"]["medium"].config == "single"  # n=4 does not fit 1x the single cost
    assert routes["high"]["easy"].config == "single"  # equal accuracy: fewer tokens wins
    assert routes["high"]["medium"].config == "self_consistency:n=4"
    assert routes["high"]["hard"] == routes["high"]["hard"]  # empty bin borrows the overall choice
    adaptive = evaluate_adaptive("a", pool, bins, routes["high"], probe_tokens=10)
    fixed = {f.name: f for f in evaluate_fixed(pool)}
    assert adaptive.accuracy == 1.0
    assert adaptive.tokens == pytest.approx((4 * 100 + 4 * 400) / 8 + 10)
    assert fixed["single"].accuracy == 0.5
    assert verdict(adaptive, fixed["self_consistency:n=4"]).startswith("NOT MET")  # 260 > 200 tokens
    cheap = evaluate_adaptive("a", pool, bins, routes["high"], probe_tokens=-60)
    assert verdict(cheap, fixed["self_consistency:n=4"]).startswith("MET")


def test_ridge_recovers_a_linear_signal() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5))
    y = np.clip(0.5 + 0.2 * x[:, 0] - 0.1 * x[:, 3], 0, 1)
    model = fit_ridge(x[:150], y[:150], alpha=1.0)
    assert spearman(model.predict(x[150:]), y[150:]) > 0.9
    with pytest.raises(ValueError):
        fit_ridge(x[:1], y[:1])


def test_agreement_matches_the_gateway_rule() -> None:
    assert agreement_difficulty(["4", "4", "4"]) == 0.0
    assert agreement_difficulty(["4", "4", "5"]) == pytest.approx(1 / 3)
    assert agreement_difficulty(["1", "2", "3"]) == 1.0
    assert agreement_difficulty([None, None]) == 1.0


def test_problem_stats_ignore_errors_and_use_gateway_difficulty() -> None:
    records = [
        rec("a", "medium", "single", "correct"),
        rec("a", "medium", "single", "error"),
        rec("a", "high", "", "wrong"),
    ]
    records[2].difficulty = 0.25
    out = problem_stats(records, {"a": "q"})
    assert out["a"].configs["single"].requests == 1
    assert out["a"].probe_difficulty == 0.25
    assert out["a"].pass1 == 0.5


def test_none_is_pinned_to_the_greedy_single_sample_even_when_a_tool_is_cheaper() -> None:
    from evaluation.calibration import pin_effort, single_sample_label

    pool = []
    for i in range(4):
        s = ProblemStats(f"p{i}", f"p{i}", 1, probe_difficulty=0.5)
        s.configs = {"single:greedy=true": ConfigStats(0.0, 200, 1), "program_of_thought:n=1": ConfigStats(1.0, 60, 1)}
        pool.append(s)
    label = single_sample_label(pool)
    assert label == "single:greedy=true"
    bins = {s.problem_id: "medium" for s in pool}
    budgets = effort_budgets(pool, label, {"none": 1.0, "low": 2.0})
    routes = choose_routes(pool, bins, EDGES, budgets)
    assert routes["none"]["medium"].config == "program_of_thought:n=1"  # what the budget search alone picks
    pin_effort(routes, "none", pool, label)
    assert {c.config for c in routes["none"].values()} == {label}
    assert routes["low"]["medium"].config == "program_of_thought:n=1"
    with pytest.raises(ValueError, match="single-sample"):
        single_sample_label([ProblemStats("x", "x", 1)])
