"""The chaos suite's short version (``python -m loadtests.chaos --short``) against a real
``ttc stack`` on SmolLM2: worker SIGKILLs, a verifier and a Redis restart under plain, streaming
and background traffic, then a short overload at 10x the measured sustainable rate. The targets
are the full run's: nothing lost or duplicated, no 5xx, no truncated or malformed answer, every
rejection a 429 with Retry-After, brownout visible in answers and metrics."""

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
    assert fault["faults"] == {"orchestrator": 2, "verifier": 1, "redis": 1}
    assert fault["restarts_logged_by_stack"] >= 4
    assert fault["requests"] >= 12 and set(fault["by_kind"]) == {"sync", "stream", "background"}
    assert fault["jobs_checked_for_duplicates"] >= 12
    for key in ("lost", "duplicated_results", "http_5xx", "truncated", "malformed"):
        assert fault[key] == 0, (key, fault)
    assert fault["recovery_s_max"] is not None and fault["recovery_s_max"] < 120
    assert overload["rejected_429"] > 0 and overload["admitted"] > 0, overload
    assert overload["rejections_not_429_with_retry_after"] == 0 and overload["http_5xx"] == 0
    assert overload["degraded_answers"] > 0 and "queue_depth" in overload["degraded_by"]
    assert overload["metric_deltas"]["ttc_gateway_effort_degradations_total"] > 0
    assert overload["metric_deltas"]["ttc_gateway_shed_total"] == overload["rejected_429"]
    assert report["missed"] == [] and code == 0
    assert "fault 4:" in (tmp_path / "chaos.log").read_text()
