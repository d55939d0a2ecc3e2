"""The frontier algorithm on hand-made stats: who is on it, what a ladder point is and whether it is beaten."""

from __future__ import annotations

import pytest

from evaluation.report.frontier import Point, by_task, config_points, dominates, ladder_points, pareto
from evaluation.routing.types import ConfigStats, ProblemStats


def stats(pid: str, **configs: tuple[float, float, float]) -> ProblemStats:
    """A problem whose configurations are (accuracy, generated, prompt)."""
    s = ProblemStats(pid, pid, 0)
    for label, (acc, gen, pro) in configs.items():
        s.configs[label] = ConfigStats(acc, gen + 0.5 * pro, 1, pro, gen)
    return s


def point(label: str, cost: float, accuracy: float) -> Point:
    return Point(label, cost, accuracy, accuracy, accuracy, cost, 0.0, 1)


def test_pareto_keeps_only_undominated_points_by_rising_cost() -> None:
    points = [point("a", 10, 0.2), point("b", 20, 0.5), point("c", 30, 0.4), point("d", 40, 0.9), point("e", 20, 0.3)]
    assert [p.label for p in pareto(points)] == ["a", "b", "d"]


def test_exact_ties_both_stay_and_a_cheaper_equal_point_wins() -> None:
    tie = pareto([point("x", 10, 0.5), point("y", 10, 0.5), point("z", 12, 0.5)])
    assert [p.label for p in tie] == ["x", "y"]
    assert dominates(point("x", 10, 0.5), point("z", 12, 0.5))
    assert not dominates(point("x", 10, 0.5), point("y", 10, 0.5))


def test_config_points_use_prefill_weighted_cost_and_only_configs_priced_everywhere() -> None:
    s = [stats("p1", cheap=(1.0, 10, 100), partial=(1.0, 1, 0)), stats("p2", cheap=(0.0, 30, 300))]
    (only,) = config_points(s, prefill_weight=0.25)
    assert only.label == "cheap"
    assert only.accuracy == pytest.approx(0.5)
    assert only.generated == pytest.approx(20) and only.prompt == pytest.approx(200)
    assert only.cost == pytest.approx(20 + 0.25 * 200)
    assert 0.0 <= only.low <= only.accuracy <= only.high <= 1.0
    assert only.problems == 2


def prediction(pid: str, task: str, **efforts: tuple[str, float, float, float]) -> dict[str, object]:
    return {
        "id": pid, "task_type": task,
        "efforts": {e: {"config": c, "accuracy": a, "generated_tokens": g, "prompt_tokens": p}
                    for e, (c, a, g, p) in efforts.items()},
    }  # fmt: skip


def test_ladder_point_mixes_the_routed_configs_and_is_judged_against_the_frontier() -> None:
    front = [point("f1", 10, 0.5), point("f2", 100, 1.0)]
    preds = [
        prediction("p1", "t", low=("a", 1.0, 10, 0), high=("f2", 1.0, 100, 0)),
        prediction("p2", "t", low=("b", 0.0, 30, 0), high=("f2", 1.0, 100, 0)),
    ]
    low, high = ladder_points(preds, front, prefill_weight=0.0)
    assert low.effort == "low" and low.configs == {"a": 1, "b": 1} and low.point.label == "a+b"
    assert low.point.cost == pytest.approx(20) and low.point.accuracy == pytest.approx(0.5)
    assert not low.on_frontier  # f1 is as accurate for less
    assert high.on_frontier and high.point.label == "f2"


def test_an_effort_without_a_priced_outcome_is_left_out_not_counted_as_zero() -> None:
    preds = [{"id": "p1", "task_type": "t", "efforts": {"low": {"config": "a"}}}]
    assert ladder_points(preds, []) == []


def test_by_task_groups_problems_by_their_task_type() -> None:
    s = [stats("p1", g=(0.0, 10, 0), v=(1.0, 40, 0)), stats("p2", g=(1.0, 10, 0), v=(1.0, 40, 0)),
         stats("p3", g=(1.0, 5, 0))]  # fmt: skip
    preds = [
        prediction("p1", "math", low=("v", 1.0, 40, 0)),
        prediction("p2", "math", low=("v", 1.0, 40, 0)),
        prediction("p3", "code", low=("g", 1.0, 5, 0)),
    ]
    code, math = by_task(s, preds, prefill_weight=0.0)
    assert (code.task, code.problems, [p.label for p in code.frontier]) == ("code", 1, ["g"])
    assert (math.task, math.problems, [p.label for p in math.frontier]) == ("math", 2, ["g", "v"])
    assert math.ladder[0].on_frontier
    assert math.as_dict()["frontier"] == ["g", "v"]


def test_by_task_can_group_by_another_field_such_as_the_held_out_kind() -> None:
    s = [stats("p1", g=(0.0, 10, 0)), stats("p2", g=(1.0, 10, 0))]
    preds = [{**prediction("p1", "math_word", low=("g", 0.0, 10, 0)), "kind": "math"},
             {**prediction("p2", "open", low=("g", 1.0, 10, 0)), "kind": "math"}]  # fmt: skip
    (math,) = by_task(s, preds, prefill_weight=0.0, key="kind")
    assert (math.task, math.problems, math.ladder[0].point.accuracy) == ("math", 2, 0.5)
    assert [k.task for k in by_task(s, preds, prefill_weight=0.0)] == ["math_word", "open"]
