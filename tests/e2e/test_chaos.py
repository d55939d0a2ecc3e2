"""The chaos suite's short version (``python -m loadtests.chaos --short``) against a real
``ttc stack`` on SmolLM2: a policy restart, worker SIGKILLs, a verifier and a Redis restart under
plain, streaming and background traffic, then a short overload at 10x the measured sustainable
rate. The targets are the full run's: every counted request succeeded (the exact count, every
other outcome listed with its reason), nothing lost (every job record in Redis final, with its
result) or duplicated, no 5xx (none during the policy restart either: the gateway admits against
the last model list and the worker waits for the policy), no truncated or malformed answer,
every rejection a 429 with Retry-After, brownout visible in answers and metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadtests import chaos

pytestmark = pytest.mark.e2e


def test_short_chaos_run_meets_the_targets(tmp_path: Path) -> None:
    code = chaos.main(["--short", "--out", str(tmp_path)])
    report = json.loads((tmp_path / "chaos.json").read_text())
    fault, overload = report["fault"], report["overload"]
    assert fault["faults"] == {"policy": 1, "orchestrator": 2, "verifier": 1, "redis": 1}
    assert fault["restarts_logged_by_stack"] >= 5
    assert fault["requests"] >= 12 and set(fault["by_kind"]) == {"sync", "stream", "background"}
    # The exact count: every request succeeded; any other outcome is listed with its reason.
    assert fault["succeeded"] == fault["requests"], fault["failures"]
    assert fault["failures"] == [] and fault["outcomes"] == {"succeeded": fault["requests"]}
    # Requests were in flight while the policy restarted, the worker waited for it (its retry
    # counter moved) and none of them got a 5xx.
    assert fault["in_flight_during_policy_restarts"] > 0, fault
    assert fault["succeeded_during_policy_restarts"] == fault["in_flight_during_policy_restarts"]
    assert fault["http_5xx_during_policy_restarts"] == 0 and fault["probes"]["http_5xx"] == 0, fault
    # The workers waited for the restarting policy: ttc_orchestrator_policy_retries_total moved.
    assert fault["policy_retries"] > 0, fault
    # Lost jobs from a scan of every job record in Redis (probes' jobs included), not only client ids.
    records = fault["job_records"]
    assert records["records"] >= fault["requests"], records
    assert records["not_final"] == records["without_result"] == records["unrecorded"] == [], records
    assert fault["jobs_checked_for_duplicates"] == records["records"]
    for key in ("lost", "duplicated_results", "http_5xx", "truncated", "malformed"):
        assert fault[key] == 0, (key, fault)
    assert fault["recovery_s_max"] is not None and fault["recovery_s_max"] < 120
    assert overload["rejected_429"] > 0 and overload["admitted"] > 0, overload
    assert overload["rejections_not_429_with_retry_after"] == 0 and overload["http_5xx"] == 0
    assert overload["lost"] == 0 and overload["job_records"]["records"] > records["records"], overload
    assert overload["degraded_answers"] > 0 and "queue_depth" in overload["degraded_by"]
    assert overload["metric_deltas"]["ttc_gateway_effort_degradations_total"] > 0
    assert overload["metric_deltas"]["ttc_gateway_shed_total"] == overload["rejected_429"]
    assert report["missed"] == [] and code == 0
    assert report["git_describe"] and len(report["load_average_start"]) == 3
    assert "fault 5:" in (tmp_path / "chaos.log").read_text()
