"""The chaos suite's pure parts: the fault schedule, the answer checks, the figures and the verdict."""

from __future__ import annotations

import itertools
from typing import Any

from loadtests.chaos import SHORT, Config, FaultFigures, _fault_figures, _pct, schedule, verdict
from loadtests.chaos_records import RecordScan, record_id
from loadtests.chaos_traffic import Outcome, check_completion


def test_schedule_spreads_restarts_among_the_worker_kills() -> None:
    faults = schedule(Config())
    assert len(faults) == 26
    assert faults.count("orchestrator") == 20
    assert faults.count("policy") == faults.count("verifier") == faults.count("redis") == 2
    others = [i for i, f in enumerate(faults) if f != "orchestrator"]
    assert others[0] > 0
    assert all(b - a >= 2 for a, b in itertools.pairwise(others)), faults
    assert schedule(SHORT) == ["policy", "orchestrator", "orchestrator", "verifier", "redis"]


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
    fault = {
        "failed": 0,
        "lost": 0,
        "duplicated_results": 0,
        "http_5xx": 0,
        "truncated": 0,
        "malformed": 0,
        "probes": {"http_5xx": 0},
        **fault_over,
    }
    overload = {
        "http_5xx": 0,
        "rejections_not_429_with_retry_after": 0,
        "no_answer": 0,
        "lost": 0,
        "degraded_answers": 3,
        "metric_deltas": {"ttc_gateway_effort_degradations_total": 3.0},
    }
    return fault, overload


def test_verdict_lists_every_missed_target() -> None:
    assert verdict(*_figures()) == []
    assert verdict(*_figures(lost=1, http_5xx=2)) == ["lost=1", "http_5xx=2"]
    # A request that failed without a 5xx (a transport error, a failed background job) is missed too.
    assert verdict(*_figures(failed=3)) == ["failed=3"]
    assert verdict(*_figures(probes={"http_5xx": 1})) == ["probes http_5xx=1"]
    fault, overload = _figures()
    overload["degraded_answers"] = 0
    overload["rejections_not_429_with_retry_after"] = 1
    assert verdict(fault, overload) == ["overload rejections_not_429_with_retry_after=1", "overload: no brownout seen"]


def test_percentiles_are_nearest_rank() -> None:
    assert _pct([], 99) is None
    assert _pct([3.0, 1.0, 2.0], 50) == 2.0
    assert _pct([float(i) for i in range(1, 101)], 99) == 99.0
    assert _pct([float(i) for i in range(1, 101)], 100) == 100.0


def test_the_figures_count_successes_exactly_and_keep_every_failure_with_its_reason() -> None:
    ok = Outcome("sync", ok=True, final_status=200, statuses=[200], started=10.0, latency_s=1.0)
    refused = Outcome("stream", problem="transport:ConnectError", started=20.0, latency_s=0.1)
    shed = Outcome("sync", final_status=503, statuses=[503, 503, 503], started=21.0, latency_s=4.0)
    failed = Outcome("background", final_status=202, statuses=[202], problem="failed:UNAVAILABLE", job_id="j1")
    figures = FaultFigures(windows=[("policy", 19.0, 22.0), ("redis", 9.0, 9.5)])
    scan = RecordScan(records=5, ids=["a", "b"], not_final=["a"], unrecorded=["zz"])
    out = _fault_figures([ok, refused, shed, failed], figures, scan, {"a": 1, "b": 2}, {"http_5xx": 0}, 1.0)
    assert (out["requests"], out["succeeded"], out["failed"]) == (4, 1, 3)
    assert out["outcomes"] == {"succeeded": 1, "transport:ConnectError": 1, "http_503": 1, "failed:UNAVAILABLE": 1}
    assert [f["reason"] for f in out["failures"]] == ["transport:ConnectError", "http_503", "failed:UNAVAILABLE"]
    assert out["failures"][2]["job_id"] == "j1"
    assert (out["in_flight_during_policy_restarts"], out["http_5xx_during_policy_restarts"]) == (2, 3)
    assert out["lost"] == 2 and out["job_records"]["not_final"] == ["a"] and "ids" not in out["job_records"]
    assert out["duplicated_results"] == 1 and out["jobs_checked_for_duplicates"] == 2


def test_only_job_record_keys_are_records() -> None:
    assert record_id("ttc:job:abc123") == "abc123"
    for key in ("ttc:job:abc123:events", "ttc:job:abc123:result", "ttc:job:", "ttc:jobs:x", "ttc:trace:abc"):
        assert record_id(key) == "", key
