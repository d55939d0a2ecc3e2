"""``make calibrate`` end to end, cheaply: the calibrate CLI draws pools for two problems on the
running policy service (SmolLM2) and sandbox, with the wall-clock limit of ``HOURS=0.2``, writes
``routing.smollm2-135m.json``; a gateway started with ``TTC_GATEWAY_ROUTING_TABLES`` naming it
serves that table's card and routes a request by it.

Kept small for ``make test``'s time budget: two families, one problem each, k=2 and short
caps (the figures mean nothing; that the table is drawn, fitted, loaded and served does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import ROOT, RedisServer, SandboxService, start_sandbox

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def sandbox() -> Iterator[SandboxService]:
    service = start_sandbox(170_000 + (os.getpid() % 200) * 64, 2)
    try:
        yield service
    finally:
        service.process.stop()


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, sandbox: SandboxService) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox.target})
    try:
        s.start_policy()
        yield s
    finally:
        s.stop()


def test_calibrate_writes_a_table_the_gateway_then_serves(
    stack: GatewayStack, sandbox: SandboxService, tmp_path: Path
) -> None:
    began = time.monotonic()
    command = [
        sys.executable, "-m", "calibration", "calibrate", "--model", MODEL, "--hours", "0.2",
        "--policy-target", stack.policy_target, "--sandbox-target", sandbox.target,
        "--families", "chain_sum,letter_counting", "--per-family", "1", "--k", "2",
        "--cot-max-tokens", "48", "--program-max-tokens", "96", "--estimator", "none", "--out", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "drew 2 problem(s)" in done.stdout
    path = tmp_path / f"routing.{MODEL}.json"
    table: dict[str, Any] = json.loads(path.read_text())
    assert table["provenance"]["problems"] == 2 and table["provenance"]["model"] == [MODEL]
    assert sorted(table["task_routes"]) == ["arithmetic", "computable"]
    # the card it prints is the gateway's own (services/gateway/ladder_card.py render_card)
    assert "#### `arithmetic`" in done.stdout and "| `none` | any | `single`, n=1" in done.stdout
    calibrated_s = time.monotonic() - began

    stack.gateway_env["TTC_GATEWAY_ROUTING_TABLES"] = f"{MODEL}={path}"
    stack.start_worker()
    stack.start_gateway()
    card = httpx.get(f"{stack.url}/v1/models/{MODEL}/ladder", timeout=30).json()
    assert card["own_table"] is True and card["calibrated"] is True, card
    assert card["table"]["path"].endswith(path.name)
    for kind, routes in [("default", table["routes"]), *table["task_routes"].items()]:
        for effort, bins in routes.items():
            for name, route in bins.items():
                rung = card["kinds"][kind][effort][name]
                assert rung["expected"] == route["expected"], (kind, effort, name)
                assert rung["configuration"]["strategy"] == route["strategy"]

    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=120)
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is 17 + 25?"}], reasoning_effort="high", max_tokens=48
    )
    ttc: dict[str, Any] = reply.model_extra["ttc"]  # type: ignore[index]
    route = table["task_routes"]["arithmetic"]["high"]["*"]
    assert (ttc["task_type"], ttc["effort_applied"], ttc["strategy"]) == ("arithmetic", "high", route["strategy"])
    print(f"calibrate took {calibrated_s:.0f}s; the whole test {time.monotonic() - began:.0f}s")
