"""The zero-token difficulty estimator, task routes and provenance in the routing table, and the
planner using both (estimate + task type once per request, task routes first, no tokens)."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation.routing.difficulty import fit_ridge
from services.common.difficulty_features import (
    FEATURE_DIM,
    FEATURE_SET,
    difficulty_features,
    estimation_text,
    text_features,
)
from services.common.embedding import DIM
from services.common.metrics import ServiceMetrics
from services.gateway.difficulty import EmbeddingEstimator, make_estimator
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Planner
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.routing import RidgeParams, RoutingTable, load_routing_table
from services.gateway.settings import GatewaySettings
from services.jobs.record import JobRecord
from tests.unit.gateway.fake_watch import ModelWatch

TABLE = Path("services/gateway/routing/routing.v1.json")
SC = {"strategy": "self_consistency", "n": 3, "token_budget": 4096}
SINGLE = {"strategy": "single", "n": 1, "token_budget": 4096}


class FakeEncoder:
    """Deterministic unit vectors from the text's length: no model needed, same interface."""

    def __init__(self) -> None:
        self.calls = 0

    def embed_one(self, text: str) -> np.ndarray:
        self.calls += 1
        v = np.cos(np.arange(DIM) * (1 + len(text) % 7))
        return np.asarray(v / np.linalg.norm(v), dtype=np.float32)


def _ridge(seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(40, FEATURE_DIM))
    y = np.clip(0.5 + 0.1 * x[:, 0] - 0.1 * x[:, DIM], 0, 1)
    return fit_ridge(x, y, alpha=1.0).to_json()


def _embedding_table(**extra: Any) -> dict[str, Any]:
    doc = json.loads(TABLE.read_text())
    doc["estimator"] = {"kind": "embedding", "features": FEATURE_SET, "ridge": _ridge()}
    doc.update(extra)
    return doc


def test_shipped_table_still_loads_with_the_probe() -> None:
    table = load_routing_table(TABLE)
    assert table.estimator.kind == "probe"
    assert table.task_routes == {}
    assert table.route("high", "medium", "code") == table.route("high", "medium")


def test_task_routes_override_the_defaults_for_their_task_type_only() -> None:
    table = RoutingTable.model_validate(
        _embedding_table(
            provenance={"data": "cal-run", "model": "qwen2.5-coder-0.5b", "date": "2026-12-01", "report": "x.json"},
            task_routes={
                "arithmetic": {"high": {"*": SC}},
                "code": {"none": {"easy": SC, "medium": SC, "hard": SINGLE}},
            },
        )
    )
    assert table.provenance["model"] == "qwen2.5-coder-0.5b"
    assert table.route("high", "easy", "arithmetic").n == 3
    assert table.route("high", "easy", "math_word") == table.route("high", "easy")  # no override: default
    assert table.route("low", None, "arithmetic") == table.route("low", None)  # other efforts: default
    assert not table.needs_difficulty("high", "arithmetic")  # "*" needs no estimate
    assert table.needs_difficulty("none", "code") and not table.needs_difficulty("none", "open")
    assert table.route("none", "hard", "code").strategy == "single"


@pytest.mark.parametrize(
    ("task_routes", "error"),
    [
        ({"poetry": {"high": {"*": SC}}}, "poetry"),
        ({"code": {"extreme": {"*": SC}}}, "extreme"),
        ({"code": {"high": {"easy": SC}}}, "every bin"),
        ({"code": {"high": {"tiny": SC, "medium": SC, "hard": SC}}}, "every bin"),
        ({"code": {"high": {"*": SC, "easy": SC}}}, "cannot be combined"),
    ],
)
def test_bad_task_routes_fail_at_load(task_routes: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        RoutingTable.model_validate(_embedding_table(task_routes=task_routes))


def test_task_types_are_defaults_not_gates_any_strategy_may_serve_any_type() -> None:
    doc = _embedding_table(task_routes={"open": {"high": {"*": {**SC, "strategy": "program_of_thought"}}}})
    doc["routes"]["high"] = {"*": {**SC, "strategy": "program_of_thought"}}
    table = RoutingTable.model_validate(doc)
    assert table.route("high", None).strategy == "program_of_thought"
    assert table.route("high", None, "open").strategy == "program_of_thought"


def test_embedding_estimator_needs_fitting_parameters_of_the_right_layout() -> None:
    doc = _embedding_table()
    del doc["estimator"]["ridge"]
    with pytest.raises(ValueError, match="ridge"):
        RoutingTable.model_validate(doc)
    doc = _embedding_table()
    doc["estimator"]["features"] = "minilm-v0"
    with pytest.raises(ValueError, match="recalibrate"):
        RoutingTable.model_validate(doc)
    doc = _embedding_table()
    doc["estimator"]["ridge"]["weights"] = doc["estimator"]["ridge"]["weights"][:10]
    with pytest.raises(ValueError, match="weights"):
        RoutingTable.model_validate(doc)
    doc = json.loads(TABLE.read_text())
    doc["estimator"]["ridge"] = _ridge()  # a probe carries no ridge
    with pytest.raises(ValueError, match="belong"):
        RoutingTable.model_validate(doc)


def test_features_layout_and_estimation_text() -> None:
    text = "What is 1234 + 56 * 7?"
    row = difficulty_features(np.zeros(DIM), text)
    assert row.shape == (FEATURE_DIM,)
    assert np.allclose(np.expm1(text_features(text)), [3, 4, 2, 5])  # numbers, max digits, operators, words (\\w+)
    assert row[-4:].tolist() == [1.0, 0.0, 0.0, 0.0]  # task one-hot: arithmetic
    messages = [("system", "Answer in \\boxed{}."), ("user", "first"), ("assistant", "ok"), ("user", text)]
    assert estimation_text(messages, "") == text
    assert estimation_text([], "raw prompt") == "raw prompt"


async def test_embedding_estimate_equals_the_fitted_ridge_and_costs_no_tokens() -> None:
    from evaluation.routing.difficulty import RidgeEstimator

    params = RidgeParams.model_validate(_ridge(3))
    encoder = FakeEncoder()
    estimator = EmbeddingEstimator(encoder, params)  # type: ignore[arg-type]
    text = "Tom has 3 apples and buys 5 more. How many apples does he have?"
    estimate = await estimator.estimate("m", [("user", text)], "")
    ridge = RidgeEstimator(
        np.array(params.weights), params.bias, np.array(params.mean), np.array(params.scale), params.alpha
    )
    expected = float(ridge.predict(difficulty_features(encoder.embed_one(text), text)[None, :])[0])
    assert estimate.difficulty == pytest.approx(expected, abs=1e-9)
    assert (estimate.prompt_tokens, estimate.generated_tokens, estimate.cached_tokens) == (0, 0, 0)


def test_make_estimator_refuses_an_embedding_table_without_an_encoder() -> None:
    table = RoutingTable.model_validate(_embedding_table())
    with pytest.raises(ValueError, match="encoder"):
        make_estimator(table.estimator, None, 1.0)  # type: ignore[arg-type]


class CountingEstimator:
    def __init__(self, inner: EmbeddingEstimator) -> None:
        self.inner = inner
        self.calls = 0

    async def estimate(self, model: str, messages: Sequence[tuple[str, str]], prompt: str) -> Any:
        self.calls += 1
        return await self.inner.estimate(model, messages, prompt)


def _planner(table: RoutingTable, estimator: CountingEstimator) -> Planner:
    metrics = GatewayMetrics(ServiceMetrics("gateway"))
    return Planner(GatewaySettings(), table, estimator, ModelWatch(max_context=4096), metrics, {})  # type: ignore[arg-type]


async def test_planner_classifies_estimates_once_and_routes_by_task_type() -> None:
    doc = _embedding_table(task_routes={"arithmetic": {"high": {"easy": SC, "medium": SC, "hard": SC}}})
    doc["routes"]["high"] = {"easy": SINGLE, "medium": SINGLE, "hard": SINGLE}
    table = RoutingTable.model_validate(doc)
    assert table.estimator.ridge is not None
    estimator = CountingEstimator(EmbeddingEstimator(FakeEncoder(), table.estimator.ridge))  # type: ignore[arg-type]
    planner = _planner(table, estimator)

    def chat(text: str, effort: str = "high") -> ChatCompletionRequest:
        return ChatCompletionRequest.model_validate(
            {"model": "m", "reasoning_effort": effort, "messages": [{"role": "user", "content": text}]}
        )

    plan = await planner.plan(chat("What is 17 + 25?"), queue_depth=0)
    assert estimator.calls == 1
    assert plan.task_type == "arithmetic" and plan.route.strategy == "self_consistency"
    assert plan.difficulty is not None and plan.difficulty_bin in {"easy", "medium", "hard"}
    record = plan.record("chat.completion", "anonymous", False, False)
    assert record.task_type == "arithmetic"
    assert record.probe.model_dump() == {"prompt_tokens": 0, "generated_tokens": 0, "cached_tokens": 0}

    plan = await planner.plan(chat("Write a short poem about autumn."), queue_depth=0)
    assert (plan.task_type, plan.route.strategy, estimator.calls) == ("open", "single", 2)

    plan = await planner.plan(chat("What is 17 + 25?", "none"), queue_depth=0)  # "*" route: no estimate
    assert (plan.task_type, plan.difficulty, estimator.calls) == ("arithmetic", None, 2)


def test_the_response_reports_the_task_type() -> None:
    from services.gateway.formatting import report_of
    from services.gen.ttc.v1 import orchestrator_pb2

    record = {"task_type": "math_word", "effort_requested": "high", "effort_applied": "high", "strategy": "single"}
    report = report_of(
        orchestrator_pb2.SearchResult(job_id="j", answer="4"), JobRecord.model_validate(copy.deepcopy(record))
    )
    assert report.task_type == "math_word"
    assert report.model_dump()["task_type"] == "math_word"
