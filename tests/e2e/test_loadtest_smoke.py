"""CI smoke of the cost-versus-accuracy harness: a few problems on SmolLM2, end to end through
the real stack (Redis, policy, sandbox, verifier, orchestrator worker, gateway), then the
report. Accuracy is not asserted (SmolLM2 cannot do arithmetic); the plumbing is: every
request is recorded with tokens, latency, TTFT, the strategy and effort the gateway reports,
a verdict or a kept-apart error, and the report page is written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import ROOT, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(2400)]


def stack_env(tmp_path: Path) -> dict[str, str]:
    """Every service on free ports, so the smoke never collides with a running stack."""
    ports = {name: free_port() for name in ("gw", "pol", "polm", "ver", "verm", "sb", "sbm", "orc", "orcm", "redis")}
    pol, ver, sb = (f"127.0.0.1:{ports[k]}" for k in ("pol", "ver", "sb"))
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TTC_LOG_JSON": "false",
        "TTC_REDIS_URL": f"redis://127.0.0.1:{ports['redis']}/0",
        "TTC_POLICY_MODEL": "smollm2-135m",
        "TTC_POLICY_PORT": str(ports["pol"]),
        "TTC_POLICY_METRICS_PORT": str(ports["polm"]),
        "TTC_SANDBOX_PORT": str(ports["sb"]),
        "TTC_SANDBOX_METRICS_PORT": str(ports["sbm"]),
        "TTC_VERIFIER_PORT": str(ports["ver"]),
        "TTC_VERIFIER_METRICS_PORT": str(ports["verm"]),
        "TTC_VERIFIER_POLICY_TARGET": pol,
        "TTC_VERIFIER_SANDBOX_TARGET": sb,
        "TTC_ORCHESTRATOR_PORT": str(ports["orc"]),
        "TTC_ORCHESTRATOR_METRICS_PORT": str(ports["orcm"]),
        "TTC_ORCHESTRATOR_POLICY_TARGET": pol,
        "TTC_ORCHESTRATOR_VERIFIER_TARGET": ver,
        "TTC_ORCHESTRATOR_SANDBOX_TARGET": sb,
        "TTC_GATEWAY_PORT": str(ports["gw"]),
        "TTC_GATEWAY_POLICY_TARGET": pol,
    }


def test_smoke_full_run_on_smollm2(tmp_path: Path) -> None:
    env = stack_env(tmp_path)
    out = tmp_path / "smoke"
    cmd = [
        sys.executable, "-m", "loadtests", "full", "--base-url", f"http://127.0.0.1:{env['TTC_GATEWAY_PORT']}/v1",
        "--model", "smollm2-135m", "--problems", "2", "--datasets", "chain_sum", "--levels", "1,2,3",
        "--configs", "single,self_consistency:n=2", "--efforts", "low,medium", "--max-tokens", "48",
        "--out", str(out),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=2200)
    finally:
        if proc.poll() is None:  # SIGTERM makes `full` stop the stack it started
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
    assert proc.returncode == 0, f"{stdout[-3000:]}\n{stderr[-3000:]}"
    records = [json.loads(line) for line in (out / "development-run" / "records.jsonl").read_text().splitlines()]
    # Every development problem x (2 pinned configurations + 2 routed efforts); the splits are by
    # hash, so the development count is whatever the split gives (3 here), never none.
    problems = {r["problem_id"] for r in records}
    assert problems and len(records) == len(problems) * 4
    answered = [r for r in records if r["outcome"] != "error"]
    assert answered, [r["error"] for r in records]
    for r in answered:
        assert r["completion_tokens"] > 0 and r["latency_s"] > 0 and r["strategy"] and r["effort_applied"]
        assert r["ttft_s"] is not None
    for r in records:
        assert (r["outcome"] == "error") == (r["correct"] is None)
    pinned = {r["strategy_pinned"] for r in records}
    assert pinned == {"single", "self_consistency:n=2", ""}
    page = (out / "report" / "report.html").read_text()
    assert "<svg" in page and "development problems: smollm2-135m" in page
