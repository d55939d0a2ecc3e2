"""Replaying a routed run's answers to score any confidence model on them (evaluation/confidence/served_replay.py)."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.confidence.served_replay import answered, replay, score, widened
from evaluation.heldout.ladder import route_key
from evaluation.pricing.pricer import Config
from evaluation.routing.served_routes import route_of
from services.common.confidence import FEATURES, Calibrator, ConfidenceSignals, shipped
from tests.unit.evaluation.pool_fixtures import draw, pool


def record(pid: str, efforts: list[str], route: dict[str, Any], *, confidence: float | None = 0.6,
           correct: bool = True, error: str = "") -> dict[str, Any]:  # fmt: skip
    return {"problem_id": pid, "efforts": efforts, "route": route, "confidence": confidence, "correct": correct,
            "error": error}  # fmt: skip


def test_answers_are_counted_as_the_live_figure_counts_them() -> None:
    route = {"strategy": "self_consistency", "n": 2, "params": {}}
    old = record("a", ["low"], route, correct=False)
    new = record("a", ["low", "medium"], route)
    shown = answered([old, new, record("b", ["low"], route, confidence=None), record("c", ["low"], route, error="x")])
    assert shown == [new]  # the newest per (problem, effort), once; no confidence or an error: not scored


def test_a_model_from_before_the_task_features_predicts_the_same_once_widened() -> None:
    data = shipped().to_dict()
    k = len(FEATURES) - 4
    weights = data["coefficients"]["features"]
    old = data | {"features": data["features"][:k], "coefficients": data["coefficients"] | {"features": weights[:k]}}
    with pytest.raises(ValueError, match="features"):
        Calibrator.from_dict(old)
    model = Calibrator.from_dict(widened(old))
    signals = ConfidenceSignals("sc", 0.75, 4, 2, 0, task_type="arithmetic")
    zero_task = data["coefficients"] | {"features": [*weights[:k], 0, 0, 0, 0]}
    zeroed = Calibrator.from_dict(data | {"coefficients": zero_task})
    assert model.probability(signals) == zeroed.probability(signals)


def test_each_answer_replays_its_route_on_its_pool_and_weighs_one() -> None:
    pools = [pool("p1", cot=draw("cot", ("1", True), [("1", True), ("2", False), ("1", True)]))]
    route = route_of(Config("sc@2", "sc", 2), pools)
    unknown = {"strategy": "mcts", "n": 8, "params": {}}
    rows, missed = replay([record("p1", ["low"], route), record("p1", ["high"], unknown)], pools, shipped())
    assert missed == 1 and route_key(route) != route_key(unknown)
    assert rows and sum(r.weight for r in rows) == pytest.approx(1.0)
    assert {r.correct for r in rows} == {True, False}  # subsets of 2 of 3: some votes split and pick "2"
    result = score(rows, resamples=20)
    assert result["problems"] == 1 and 0.0 <= result["ece"] <= 1.0
