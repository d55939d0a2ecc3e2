"""Pure gateway logic: effort, admission, routing table, difficulty agreement, usage accounting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.common.errors import InvalidArgument
from services.gateway.admission import Thresholds, admit, normalize_effort, step_down
from services.gateway.auth import Authenticator, parse_api_keys
from services.gateway.difficulty import agreement_difficulty
from services.gateway.effort import parse_model_defaults
from services.gateway.errors import HTTPError, JobFailed
from services.gateway.formatting import raise_for_failure
from services.gateway.protocol import TTCOptions
from services.gateway.routing import RoutingTable, apply_overrides, load_routing_table
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.errors import JobError
from services.jobs.record import JobRecord

TABLE = Path("services/gateway/routing/routing.v1.json")
T = Thresholds(max_queue_depth=20, degrade_queue_depth=5, degrade_kv_utilization=0.8, shed_kv_utilization=0.95)


def test_effort_explicit_beats_defaults_and_spellings_must_agree() -> None:
    assert normalize_effort("high", None, "m", {"m": "low"}, "none") == "high"
    assert normalize_effort(None, "medium", "m", {}, "none") == "medium"
    assert normalize_effort(None, None, "m", {"m": "low"}, "none") == "low"
    assert normalize_effort(None, None, "other", {"m": "low"}, "minimal") == "minimal"
    with pytest.raises(InvalidArgument) as err:
        normalize_effort("high", "low", "m", {}, "none")
    assert err.value.field == "reasoning_effort"


def test_model_defaults_reject_unknown_effort() -> None:
    assert parse_model_defaults("a=high, b=none") == {"a": "high", "b": "none"}
    with pytest.raises(ValueError, match="ultra"):
        parse_model_defaults("a=ultra")


def test_step_down_floors_at_none() -> None:
    assert step_down("high", 1) == "medium"
    assert step_down("minimal", 5) == "none"
    assert step_down("xhigh", 0) == "xhigh"


def test_admission_degrades_step_by_step_then_sheds() -> None:
    assert admit("high", 0, 0.1, T).effort == "high"
    assert admit("high", 0, 0.1, T).degraded_by == []
    one = admit("high", 5, 0.1, T)
    assert (one.effort, one.degraded_by) == ("medium", ["queue_depth"])
    two = admit("high", 10, 0.85, T)
    assert two.effort == "minimal"
    assert two.degraded_by == ["queue_depth", "kv_utilization"]
    assert admit("high", 20, 0.0, T).shed
    assert admit("high", 0, 0.96, T).shed
    # Nothing left to lower: not reported as a degradation.
    assert admit("none", 10, 0.9, T).degraded_by == []


def test_shipped_routing_table_is_valid_and_routes_every_effort() -> None:
    table = load_routing_table(TABLE)
    assert not table.needs_difficulty("none")
    assert table.needs_difficulty("high")
    assert table.route("none", None).strategy == "single"
    assert table.bin_of(0.0) == "easy"
    assert table.bin_of(1.0) == "hard"
    assert table.route("high", "medium").n >= table.route("medium", "medium").n


def test_routing_table_rejects_missing_effort_and_bins() -> None:
    doc = json.loads(TABLE.read_text())
    del doc["routes"]["xhigh"]
    with pytest.raises(ValueError, match="xhigh"):
        RoutingTable.model_validate(doc)
    doc = json.loads(TABLE.read_text())
    del doc["routes"]["high"]["hard"]
    with pytest.raises(ValueError, match="every bin"):
        RoutingTable.model_validate(doc)


def test_overrides_pin_strategy_and_budget() -> None:
    route = load_routing_table(TABLE).route("none", None)
    pinned = apply_overrides(route, TTCOptions(strategy="self_consistency", n=6, token_budget=999))
    assert (pinned.strategy, pinned.n, pinned.token_budget) == ("self_consistency", 6, 999)
    assert apply_overrides(route, None) == route


def test_agreement_difficulty() -> None:
    assert agreement_difficulty(["4", "4", "4"]) == 0.0
    assert agreement_difficulty(["4", "4", "5"]) == pytest.approx(1 / 3)
    assert agreement_difficulty(["1", "2", "3"]) == 1.0
    assert agreement_difficulty(["", "", ""]) == 1.0


def test_usage_counts_every_hidden_token_as_reasoning() -> None:
    result = orchestrator_pb2.SearchResult(job_id="j", answer="42", answer_tokens=10)
    result.budget_used.generated_tokens = 100
    result.budget_used.verifier_prompt_tokens = 30
    result.budget_used.verifier_generated_tokens = 4
    result.budget_used.prompt_tokens = 50
    result.budget_used.cached_tokens = 20
    record = {"probe": {"prompt_tokens": 15, "generated_tokens": 12, "cached_tokens": 5}}
    usage = usage_of(result, JobRecord.model_validate(record))
    assert usage.completion_tokens == 100 + 4 + 12
    assert usage.completion_tokens_details.reasoning_tokens == usage.completion_tokens - 10
    assert usage.prompt_tokens == 50 + 30 + 15  # judge prompts are prompt tokens
    assert usage.prompt_tokens_details.cached_tokens == 25
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_failed_results_map_to_errors() -> None:
    invalid = orchestrator_pb2.SearchResult(
        termination=orchestrator_pb2.TERMINATION_ERROR,
        error=JobError("INVALID_ARGUMENT", "too long", field="max_tokens").to_json(),
    )
    with pytest.raises(JobFailed) as err:
        raise_for_failure(invalid)
    assert err.value.error.field == "max_tokens"
    cancelled = orchestrator_pb2.SearchResult(termination=orchestrator_pb2.TERMINATION_CANCELLED)
    with pytest.raises(HTTPError):
        raise_for_failure(cancelled)
    raise_for_failure(orchestrator_pb2.SearchResult(answer="x", termination=orchestrator_pb2.TERMINATION_BUDGET))


def test_api_keys_and_bearer_auth() -> None:
    keys = parse_api_keys("alice:sk-a, sk-b")
    assert keys == {"sk-a": "alice", "sk-b": "key-sk-b"}
    auth = Authenticator(keys)
    assert auth.caller("Bearer sk-a") == "alice"
    for header in (None, "Bearer nope", "Basic sk-a", "Bearer "):
        with pytest.raises(HTTPError) as err:
            auth.caller(header)
        assert err.value.status == 401
    assert Authenticator({}).caller(None) == "anonymous"
