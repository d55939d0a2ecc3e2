"""Planning is one straight pipeline: every request, pinned or routed, enters each step once and
in the same order (inputs, effort and admission, task and difficulty, route, validate, job); its
job is routed once, built once and validated once. The order of answers holds: 400s first
(request-only checks, then the validator's, named ``ttc.<field>`` for a pinned strategy), whatever
the load; then the model's 404/503, then admission's 429."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.common.errors import InvalidArgument, ServiceError, Unavailable
from services.common.metrics import ServiceMetrics
from services.gateway.difficulty import Estimate
from services.gateway.errors import HTTPError
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Planner
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest
from services.gateway.routing import RoutingTable, load_routing_table
from services.gateway.settings import GatewaySettings
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import validation
from tests.unit.gateway.fake_watch import ModelWatch

TABLE = Path("services/gateway/routing/routing.v1.json")
_METRICS = GatewayMetrics(ServiceMetrics("gateway-planning-test"))


class Estimator:
    def __init__(self) -> None:
        self.calls = 0

    async def estimate(self, model: str, messages: Any, prompt: str) -> Estimate:
        self.calls += 1
        return Estimate(difficulty=0.9, prompt_tokens=10, generated_tokens=20, cached_tokens=0)


class Validator:
    """Counts calls; refuses a pinned job's strategy parameter like the orchestrator would."""

    def __init__(self) -> None:
        self.jobs: list[orchestrator_pb2.SearchJob] = []

    def __call__(self, job: orchestrator_pb2.SearchJob) -> None:
        self.jobs.append(job)
        validation.validate(job)
        if "bad" in job.strategy.params.fields:
            raise InvalidArgument("bad is not a parameter of this strategy", field="strategy.params.bad")


STEPS = ["check", "admit", "difficulty", "route", "validate", "admitted"]


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pipeline's steps in the order a request enters them."""
    entered: list[str] = []
    for name in STEPS:
        original = getattr(Planner, name)

        def step(self: Planner, *args: Any, _name: str = name, _original: Any = original) -> Any:
            entered.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(Planner, name, step)
    return entered


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    calls: list[tuple[Any, ...]] = []
    original = RoutingTable.route

    def counting(self: RoutingTable, *args: Any) -> Any:
        calls.append(args)
        return original(self, *args)

    monkeypatch.setattr(RoutingTable, "route", counting)
    return calls


def _planner(watch: ModelWatch, validator: Validator, estimator: Estimator | None = None, **settings: Any) -> Planner:
    table = load_routing_table(TABLE)
    return Planner(GatewaySettings(**settings), table, estimator, watch, _METRICS, {}, validator)  # type: ignore[arg-type]


def _chat(**extra: Any) -> ChatCompletionRequest:
    body = {"model": "m", "messages": [{"role": "user", "content": "What is 17 + 25?"}], **extra}
    return ChatCompletionRequest.model_validate(body)


@pytest.mark.parametrize(
    "extra",
    [
        {"reasoning_effort": "high"},
        {"reasoning_effort": "high", "ttc": {"strategy": "self_consistency", "n": 3}},
        {"reasoning_effort": "none", "ttc": {"strategy": "single"}},
    ],
    ids=["routed", "pinned", "pinned-none"],
)
async def test_every_request_enters_each_step_once_in_the_same_order(
    routes: list[tuple[Any, ...]], steps: list[str], extra: Any
) -> None:
    validator, watch, estimator = Validator(), ModelWatch(), Estimator()
    plan = await _planner(watch, validator, estimator).plan(_chat(**extra), queue_depth=0)
    assert steps == STEPS
    assert len(routes) == 1, routes
    assert validator.jobs == [plan.job]  # the job validated is the job enqueued
    assert watch.model_calls == 1
    if "ttc" in extra:  # a pinned strategy needs no difficulty: the step is entered, the estimator is not
        assert plan.route.strategy == extra["ttc"]["strategy"] and plan.probe is None and estimator.calls == 0


async def test_a_routed_request_routes_once_with_its_difficulty(routes: list[tuple[Any, ...]]) -> None:
    estimator, validator = Estimator(), Validator()
    planner = _planner(ModelWatch(), validator, estimator)
    if not planner.default_routing.table.needs_difficulty("high", "arithmetic"):
        pytest.skip("the packaged table routes this effort without a difficulty estimate")
    plan = await planner.plan(_chat(reasoning_effort="high"), queue_depth=0)
    assert estimator.calls == 1 and len(routes) == 1 and len(validator.jobs) == 1
    assert routes[0][1] == plan.difficulty_bin is not None
    assert plan.difficulty == pytest.approx(0.9)


async def test_a_bad_pinned_strategy_is_400_naming_ttc_before_the_model_or_admission(
    routes: list[tuple[Any, ...]], steps: list[str]
) -> None:
    validator, watch = Validator(), ModelWatch(up=False)
    bad = _chat(ttc={"strategy": "best_of_n", "params": {"bad": 1}})
    with pytest.raises(InvalidArgument) as caught:
        await _planner(watch, validator).plan(bad, queue_depth=10_000)  # policy down and queue full
    assert caught.value.field == "ttc.params.bad"  # the request's own field, nested
    # Admission looked the model up and decided; validation answered before its refusal was acted on.
    assert steps == STEPS[:-1]
    assert watch.model_calls == 1 and len(routes) == 1 and len(validator.jobs) == 1
    # A good pinned request in the same state gets the model's 503 (then admission's 429).
    with pytest.raises(Unavailable):
        await _planner(watch, validator).plan(_chat(ttc={"strategy": "best_of_n"}), queue_depth=10_000)
    with pytest.raises(HTTPError) as shed:
        await _planner(ModelWatch(), validator).plan(_chat(ttc={"strategy": "best_of_n"}), queue_depth=10_000)
    assert shed.value.status == 429


async def test_a_refused_routed_request_spends_no_probe_and_is_still_validated(
    routes: list[tuple[Any, ...]], steps: list[str]
) -> None:
    """Under a full queue a routed request is not probed; an invalid one is a 400 all the same
    (its ``ttc`` overrides are validated on the route the table takes without a difficulty)."""
    estimator, validator = Estimator(), Validator()
    with pytest.raises(HTTPError) as shed:
        await _planner(ModelWatch(), validator, estimator).plan(_chat(reasoning_effort="high"), queue_depth=10_000)
    assert shed.value.status == 429 and estimator.calls == 0 and len(validator.jobs) == 1
    assert steps == STEPS
    steps.clear()
    bad = _chat(reasoning_effort="high", ttc={"n": 3, "params": {"bad": 1}})
    with pytest.raises(InvalidArgument) as caught:
        await _planner(ModelWatch(up=False), validator, estimator).plan(bad, queue_depth=10_000)
    assert caught.value.field == "strategy.params.bad" and estimator.calls == 0
    assert steps == STEPS[:-1]


@pytest.mark.parametrize(
    ("extra", "field"),
    [({"stop": ["a", "b", "c", "d", "e"]}, "stop"), ({"max_tokens": 100_000}, "max_tokens")],
)
async def test_request_only_checks_come_first(routes: list[tuple[Any, ...]], extra: Any, field: str) -> None:
    validator, watch = Validator(), ModelWatch(up=False)
    request = _chat(ttc={"strategy": "best_of_n", "params": {"bad": 1}}, **extra)
    with pytest.raises(ServiceError) as caught:
        await _planner(watch, validator, max_tokens_cap=4096).plan(request, queue_depth=0)
    assert caught.value.field == field
    assert routes == [] and validator.jobs == [] and watch.model_calls == 0


def test_a_default_max_tokens_is_capped_and_an_explicit_one_refused() -> None:
    """Legacy completions' default ``max_tokens`` (16) above the server's cap is lowered to the
    cap; the same number sent by the user is a 400 naming ``max_tokens``."""
    planner = _planner(ModelWatch(), Validator(), max_tokens_cap=4)
    _, max_tokens = planner.check(CompletionRequest(model="m", prompt="hi"))
    assert max_tokens == 4
    with pytest.raises(InvalidArgument) as caught:
        planner.check(CompletionRequest(model="m", prompt="hi", max_tokens=16))
    assert caught.value.field == "max_tokens"


@pytest.mark.parametrize(
    ("extra", "quiet"),
    [
        ({}, True),  # waits for the result: nobody reads the events
        ({"stream": True}, False),
        ({"stream": True, "ttc": {"stream_reasoning": False}}, True),  # the answer alone: nothing to publish
    ],
    ids=["waits", "streams", "streams-no-reasoning"],
)
async def test_planning_decides_whether_the_worker_publishes_reasoning(extra: Any, quiet: bool) -> None:
    plan = await _planner(ModelWatch(), Validator(), Estimator()).plan(_chat(**extra), queue_depth=0)
    assert plan.job.quiet is quiet
    assert plan.job.stream_answer is bool(extra.get("stream"))


def test_a_job_field_is_named_by_the_request_field_it_came_from() -> None:
    from services.gateway.errors import request_field

    assert request_field("strategy.params.large_params.bogus") == "ttc.params.large_params.bogus"
    assert request_field("strategy.params.threshold") == "ttc.params.threshold"
    assert request_field("strategy.name") == "ttc.strategy"
    assert request_field("strategy.n") == "ttc.n"
    assert request_field("strategy.verifier") == "ttc.verifier"
    assert request_field("reference") == "ttc.reference"
    assert request_field("") == "ttc"
