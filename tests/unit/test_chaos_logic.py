"""The chaos suite's pure parts: the fault schedule, the answer checks and the verdict."""

from __future__ import annotations

import itertools
from typing import Any

from loadtests.chaos import SHORT, Config, _pct, schedule, verdict
from loadtests.chaos_traffic import check_completion


def test_schedule_spreads_restarts_among_the_worker_kills() -> None:
    faults = schedule(Config())
    assert len(faults) == 26
    assert faults.count("orchestrator") == 20
    assert faults.count("policy") == faults.count("verifier") == faults.count("redis") == 2
    others = [i for i, f in enumerate(faults) if f != "orchestrator"]
    assert others[0] > 0
    assert all(b - a >= 2 for a, b in itertools.pairwise(others)), faults
    assert schedule(SHORT) == ["orchestrator", "verifier", "orchestrator", "redis"]


def _completion(**over: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-abc",
        "object": "chat.completion",
        "choices": [{"message": {"content": "4"}, "finish_reason": "stop"}],
        "usage": {"completion_tokens": 1},
    }
    body.update(over)
    return body


def test_check_completion_names_what_is_wrong() -> None:
    assert check_completion(_completion()) == ""
    assert check_completion(_completion(object="list")) == "malformed:object"
    assert check_completion(_completion(choices=[{"message": {"content": None}, "finish_reason": "stop"}])) == (
        "malformed:choice"
    )
    assert check_completion(_completion(choices=[])) == "malformed:shape"
    assert check_completion(_completion(usage={})) == "malformed:shape"
    assert check_completion(None) == "malformed:shape"


def _figures(**fault_over: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    fault = {"lost": 0, "duplicated_results": 0, "http_5xx": 0, "truncated": 0, "malformed": 0, **fault_over}
    overload = {
        "http_5xx": 0,
        "rejections_not_429_with_retry_after": 0,
        "no_answer": 0,
        "degraded_answers": 3,
        "metric_deltas": {"ttc_gateway_effort_degradations_total": 3.0},
    }
    return fault, overload


def test_verdict_lists_every_missed_target() -> None:
    assert verdict(*_figures()) == []
    assert verdict(*_figures(lost=1, http_5xx=2)) == ["lost=1", "http_5xx=2"]
    fault, overload = _figures()
    overload["degraded_answers"] = 0
    overload["rejections_not_429_with_retry_after"] = 1
    assert verdict(fault, overload) == ["overload rejections_not_429_with_retry_after=1", "overload: no brownout seen"]


def test_percentiles_are_nearest_rank() -> None:
    assert _pct([], 99) is None
    assert _pct([3.0, 1.0, 2.0], 50) == 2.0
    assert _pct([float(i) for i in range(1, 101)], 99) == 99.0
    assert _pct([float(i) for i in range(1, 101)], 100) == 100.0
