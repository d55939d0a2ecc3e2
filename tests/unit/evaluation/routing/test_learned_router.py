"""The learned router on synthetic pools: features that decide which configuration is right,
budgets that rule configurations out, and cross-validation that holds every problem out once."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.heldout.learned_heldout import evaluate_heldout, steps_down
from evaluation.routing.learned_router import (
    cross_validate,
    grouped_folds,
    knn_predictor,
    paired_difference,
    ridge_predictor,
    route_learned,
    route_neighbourhood,
    route_table,
)
from evaluation.routing.route_fit import GREEDY
from evaluation.routing.router_problems import RouterProblem
from evaluation.routing.types import ConfigStats, ProblemStats

MULTIPLES = {"none": 1.0, "minimal": 1.0, "low": 2.0, "xhigh": 16.0}


def _cs(accuracy: float, tokens: float) -> ConfigStats:
    return ConfigStats(accuracy=accuracy, tokens=tokens, requests=1, generated_tokens=tokens)


def _problem(i: int, x: float, *, costly: float = 0.0, code: bool = False) -> RouterProblem:
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
    return RouterProblem(stats, np.array([x, 1.0 - abs(x), 0.1 * i]), "math", "fam", not code)


def _problems(n: int = 24, **kw: float) -> list[RouterProblem]:
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


# ------------------------------------------------------------------------------ held-out mode
def _kinded(problems: list[RouterProblem], kind: str) -> list[RouterProblem]:
    return [RouterProblem(p.stats, p.features, p.task, p.family, p.text, kind) for p in problems]


def test_heldout_knn_beats_the_table_where_the_feature_decides_and_is_hand_checkable() -> None:
    # Train on 24 prompts, test on 10 others. `a` is right (0.8) for x > 0 and `b` for x < 0;
    # the table sees one group, so it picks one of them for every prompt at `low` and scores
    # 0.8 on the half of the test where it is right: 0.4. kNN (k=1 on x) picks right on all: 0.8.
    train = _kinded(_problems(24), "math")
    test = _kinded([_problem(200 + i, float(x)) for i, x in enumerate(np.linspace(-0.9, 0.9, 10))], "math")
    result = evaluate_heldout(train, test, {
        "table": lambda tr, te: route_table(tr, te, MULTIPLES),
        "knn": lambda tr, te: route_learned(tr, te, knn_predictor(k=1, dims=1), MULTIPLES),
    }, multiples=MULTIPLES)  # fmt: skip
    g = result["groups"]["all"]
    assert set(result["groups"]) == {"math", "all"} and g["problems"] == 10
    assert g["routers"]["table"]["low"]["accuracy"] == pytest.approx(0.4)
    assert g["routers"]["knn"]["low"]["accuracy"] == pytest.approx(0.8)
    assert g["minus_table"]["knn"]["low"]["mean"] == pytest.approx(0.4)
    assert g["minus_table"]["knn"]["low"]["interval"][0] > 0  # every paired difference is 0 or +0.8
    assert g["routers"]["knn"]["low"]["cost"] == pytest.approx(200.0)
    assert g["routers"]["knn"]["none"]["accuracy"] == pytest.approx(0.2)  # none: one greedy sample
    assert g["best_fixed"]["low"]["config"] in {"a", "b"} and g["best_fixed"]["low"]["summary"]["accuracy"] == 0.4
    assert g["best_fixed"]["xhigh"]["summary"]["accuracy"] == 0.4  # `big` (0.0) fits but loses
    assert [r["routes"]["knn"]["low"] for r in result["per_problem"]] == ["b"] * 5 + ["a"] * 5


def test_steps_down_lists_a_family_whose_accuracy_falls_between_efforts() -> None:
    test = _problems(4)
    routes = [{"none": "a", "low": "b"} for _ in test]  # a: 0.8 on x > 0 (2 of 4), b: on x < 0
    assert steps_down(test, routes, ["none", "low"]) == []
    falls = [{"none": GREEDY, "low": "big"} for _ in test]  # 0.2 -> 0.0
    assert steps_down(test, falls, ["none", "low"]) == [
        {"family": "fam", "from": "none", "to": "low", "problems": 4, "before": 0.2, "after": 0.0}
    ]


def test_shrinkage_all_the_way_is_the_task_types_best_mean_for_every_prompt() -> None:
    problems = _problems(24)
    routes = route_learned(problems[::2], problems[1::2], knn_predictor(k=1, dims=1), MULTIPLES, shrink=1.0)
    assert len({r["low"] for r in routes}) == 1


def test_the_neighbourhood_router_leaves_the_task_types_route_only_by_a_margin() -> None:
    # The task type's stable choice at `low` stays greedy (a and b tie with it on average and
    # neither beats it by a paired margin); a prompt's 4 nearest neighbours all favour its side.
    problems = _problems(24)
    routes = route_neighbourhood(problems[::2], problems[1::2], k=4, multiples=MULTIPLES, dims=1)
    for p, r in zip(problems[1::2], routes, strict=True):
        assert r["none"] == GREEDY
        assert r["low"] == ("a" if p.features[0] > 0 else "b")
