"""The learned router on synthetic pools: features that decide which configuration is right,
budgets that rule configurations out, and cross-validation that holds every problem out once."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.calibration import ConfigStats, ProblemStats
from evaluation.learned_router import (
    Problem,
    cross_validate,
    grouped_folds,
    knn_predictor,
    paired_difference,
    ridge_predictor,
    route_learned,
    route_table,
)
from evaluation.route_fit import GREEDY

MULTIPLES = {"none": 1.0, "minimal": 1.0, "low": 2.0, "xhigh": 16.0}


def _cs(accuracy: float, tokens: float) -> ConfigStats:
    return ConfigStats(accuracy=accuracy, tokens=tokens, requests=1, generated_tokens=tokens)


def _problem(i: int, x: float, *, costly: float = 0.0, code: bool = False) -> Problem:
    """Config ``a`` is right (0.8) when x > 0, ``b`` when x < 0; both cost 2 greedy samples;
    greedy is right a fifth of the time everywhere; ``big`` (16x) is right with ``costly``."""
    stats = ProblemStats(f"p{i}", f"q{i}", 0)
    stats.configs = {
        GREEDY: _cs(0.2, 100.0),
        "a": _cs(0.8 if x > 0 else 0.0, 200.0),
        "b": _cs(0.8 if x < 0 else 0.0, 200.0),
        "big": _cs(costly, 1600.0),
    }
    if code:
        stats.configs["code_only"] = _cs(1.0, 100.0)
    stats.pass1 = 0.5
    return Problem(stats, np.array([x, 1.0 - abs(x), 0.1 * i]), "math", "fam", not code)


def _problems(n: int = 24, **kw: float) -> list[Problem]:
    xs = np.linspace(-1, 1, n) + 1e-3  # none exactly 0
    return [_problem(i, float(x), **kw) for i, x in enumerate(xs)]  # type: ignore[arg-type]


def test_grouped_folds_hold_each_group_out_once_and_together() -> None:
    groups = ["g1", "g1", "g2", "g3", "g3", "g3", "g4", "g5"]
    folds = grouped_folds(groups, 3, seed=1)
    seen = np.concatenate(folds)
    assert sorted(seen.tolist()) == list(range(len(groups)))
    for fold in folds:
        names = {groups[i] for i in fold}
        assert all(groups[j] not in names for other in folds if other is not fold for j in other)


def test_knn_predicts_the_mean_of_the_nearest_prompts() -> None:
    train = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    y = np.array([1.0, 0.0, 0.5])
    got = knn_predictor(k=2, dims=2)(train, y, np.array([[1.0, 0.05], [0.0, 1.0]]))
    assert got[0] == pytest.approx(0.5)
    assert got[1] == pytest.approx(0.25)  # nearest: [0,1] then [0.9,0.1]


def test_the_learned_router_picks_per_prompt_what_features_say_is_right() -> None:
    problems = _problems()
    train, test = problems[::2], problems[1::2]
    routes = route_learned(train, test, knn_predictor(k=1, dims=1), MULTIPLES)
    for p, r in zip(test, routes, strict=True):
        assert r["none"] == GREEDY
        assert r["minimal"] == GREEDY  # a and b cost twice the greedy budget
        assert r["low"] == ("a" if p.features[0] > 0 else "b")
    # the table routes by task type and difficulty bin (all pass@1 are equal here: one choice)
    table = route_table(train, test, MULTIPLES)
    assert len({r["low"] for r in table}) == 1


def test_budget_rules_out_a_configuration_until_the_effort_affords_it() -> None:
    problems = _problems(costly=1.0)
    routes = route_learned(problems[::2], problems[1::2], knn_predictor(k=1, dims=1), MULTIPLES)
    assert all(r["low"] != "big" for r in routes)
    assert all(r["xhigh"] == "big" for r in routes)


def test_a_configuration_that_does_not_apply_to_the_prompt_is_never_picked() -> None:
    text = _problems(12)
    code = [_problem(100 + i, 0.5, code=True) for i in range(6)]
    routes = route_learned(text[::2] + code[::2], text[1::2], ridge_predictor(), MULTIPLES)
    assert all("code_only" not in r.values() for r in routes)


def test_cross_validation_holds_every_problem_out_and_learned_beats_the_table_here() -> None:
    problems = _problems(30)
    result = cross_validate(problems, {"knn": knn_predictor(k=1, dims=1)}, folds=5, multiples=MULTIPLES)
    assert [p["id"] for p in result["predictions"]] == [p.stats.problem_id for p in problems]
    assert {p["fold"] for p in result["predictions"]} == set(range(5))
    knn, table = result["routers"]["knn"]["low"], result["routers"]["table"]["low"]
    assert knn["problems"] == table["problems"] == 30
    assert knn["accuracy"] > table["accuracy"]
    lo, hi = knn["interval"]
    assert lo <= knn["accuracy"] <= hi
    assert result["routers"]["knn"]["none"]["accuracy"] == result["fixed"][GREEDY]["accuracy"]
    assert result["learned_minus_table"]["knn"]["low"]["mean"] == pytest.approx(knn["accuracy"] - table["accuracy"])
    assert set(result["fixed"]) == {GREEDY, "a", "b", "big"}


def test_paired_difference_interval_brackets_the_mean() -> None:
    d = paired_difference([1, 1, 0, 1], [0, 1, 0, 0])
    assert d["mean"] == pytest.approx(0.5)
    assert d["interval"][0] <= 0.5 <= d["interval"][1]
