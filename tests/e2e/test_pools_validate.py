"""``python -m calibration validate`` end to end, cheaply: program of thought n=1 (``pot@1``)
priced from the committed SmolLM2 pools runs live through a real gateway (Redis, the policy
service on SmolLM2, a worker, the sandbox) on the first two problems it prices; the records
chunk and ``report.json`` are written, agree with each other and with the pricer, and a second
run resumes with nothing left to send.

Kept small for ``make test``'s time budget: one configuration, two arithmetic problems whose
greedy programs are a few dozen tokens (the figures mean nothing; that the live run is
recorded, checked and compared does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from calibration.lib.pool_run import model_sha256
from calibration.lib.records import read_records
from evaluation.pools.store import read_pools
from evaluation.pricing.pricer import Pricer
from evaluation.pricing.table import default_configs, fit_latency
from services.search.strategies.stopping import should_stop
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import ROOT, RedisServer, SandboxService, start_sandbox

pytestmark = pytest.mark.e2e

POOLS = ROOT / "docs" / "data" / "calibration" / "smollm2-135m" / "pools"


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxService]:
    service = start_sandbox(190_000 + (os.getpid() % 200) * 64, 2)
    try:
        yield service
    finally:
        service.process.stop()


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, sandbox: SandboxService) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox.target})
    try:
        s.start_policy()
        s.start_worker(concurrency=1)
        s.start_gateway()
        yield s
    finally:
        s.stop()


def _validate(stack: GatewayStack, out: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "calibration", "validate", "--model", MODEL, "--pools", str(POOLS),
        "--configs", "pot@1", "--limit", "2", "--base-url", f"{stack.url}/v1", "--out", str(out), "--timeout-s", "120",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_validate_records_live_runs_and_reports_them_against_the_pools(stack: GatewayStack, tmp_path: Path) -> None:
    done = _validate(stack, tmp_path)
    records, headers, _ = read_records(tmp_path)
    assert len(headers) == 1 and len(records) == 2
    header = headers[0]
    assert header["model_sha256"] == model_sha256(MODEL) and header["git_describe"]
    assert header["settings"]["pins"]["pot@1"]["strategy"] == "program_of_thought"
    assert header["settings"]["pool_settings"]["temperature"] == 0.7
    pools = [p for p in read_pools(POOLS, "calibration") if p.kind != "code"][:2]
    assert [r["problem_id"] for r in records] == [p.id for p in pools]
    for r in records:
        assert r["config"] == "pot@1" and r["ttc"]["n"] == 1
        if r["error"]:  # an infrastructure error is recorded as such, never as a verdict
            assert r["correct"] is None and r["error_kind"]
        else:
            assert r["strategy"] == "program_of_thought" and isinstance(r["correct"], bool)
            assert r["completion_tokens"] > 0 and r["prompt_tokens"] > 0 and r["latency_s"] > 0

    body = json.loads((tmp_path / "report.json").read_text())
    (check,) = body["checks"]
    usable = [r for r in records if not r["error"]]
    assert check["config"] == "pot@1" and check["problems"] == len(usable)
    assert check["errors"] == len(records) - len(usable)
    if usable:
        assert check["live_accuracy"] == pytest.approx(sum(bool(r["correct"]) for r in usable) / len(usable))
        assert check["verdict"] == ("agrees" if check["priced_low"] <= check["live_accuracy"] <= check["priced_high"]
                                    else "disagrees")  # fmt: skip
    # The priced side is the pricer's own estimate on the same problems.
    config = next(c for c in default_configs(4) if c.name == "pot@1")
    pricer = Pricer(fit_latency(read_pools(POOLS, "calibration")), lambda v, r: should_stop(v, r, 0.9).stop)
    for pool in pools:
        estimate = pricer.estimate(pool, config)
        assert estimate is not None
        assert body["per_problem"]["pot@1"][pool.id]["priced"] == pytest.approx(estimate.accuracy)
    assert "| `pot@1` |" in done.stdout

    again = _validate(stack, tmp_path)  # resumes: every pair is recorded, nothing is sent
    assert "0 to send" in again.stdout
    assert len(read_records(tmp_path)[0]) == 2
