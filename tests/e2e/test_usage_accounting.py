"""The usage a client sees is what the engine counted: for one request of each strategy, the
response's prompt, cached and generated tokens equal the deltas of the policy service's own
``ttc_tokens_total{service="policy",kind=...}`` counters over that request.

The stack: Redis, the policy service on SmolLM2 (llama.cpp), a verifier service judging with
that same policy (ORM and PRM ``Score`` calls land on the same counters), one worker and the
gateway. Requests run one at a time so every counter delta belongs to one request; answers are
kept short (SmolLM2, max_tokens 24, two or three candidates) so the module runs in well
under a minute once the model is loaded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer, ServiceProcess, free_port, grpc_healthy

pytestmark = pytest.mark.e2e
PROMPT = "Tom has 3 boxes of 4 apples. How many apples does he have? Answer with a number."
KINDS = ("prompt", "cached", "generated")

CASES: dict[str, dict[str, Any] | None] = {
    "single": {"strategy": "single", "n": 1},
    "self_consistency": {"strategy": "self_consistency", "n": 3},
    "best_of_n_orm": {"strategy": "best_of_n", "n": 2, "verifier": "orm"},
    "beam_search_prm": {
        "strategy": "beam_search",
        "n": 2,
        "verifier": "prm",
        "params": {"beam_width": 2, "expansion": 2, "max_steps": 2},
    },
    "routed_with_probe": None,  # effort "medium", not pinned: the gateway's probe runs first
}


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server)
    verifier: ServiceProcess | None = None
    try:
        s.start_policy({"TTC_POLICY_N_CTX": "2048", "TTC_POLICY_N_THREADS": "2"})
        port = free_port()
        verifier = ServiceProcess(
            "verifier",
            env={
                "TTC_VERIFIER_HOST": "127.0.0.1",
                "TTC_VERIFIER_PORT": str(port),
                "TTC_VERIFIER_METRICS_PORT": str(free_port()),
                "TTC_VERIFIER_POLICY_TARGET": s.policy_target,
            },
        ).start()
        verifier.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=60)
        s.worker_env["TTC_ORCHESTRATOR_VERIFIER_TARGET"] = f"127.0.0.1:{port}"
        s.start_worker(concurrency=1)
        s.start_gateway()
        yield s
    finally:
        s.stop()
        if verifier is not None:
            verifier.stop()


def engine_counts(stack: GatewayStack) -> dict[str, float]:
    return {k: stack.policy_metric("ttc_tokens_total", service="policy", kind=k) for k in KINDS}


@pytest.mark.parametrize("case", list(CASES))
def test_usage_equals_the_engines_counter_deltas(stack: GatewayStack, case: str) -> None:
    pinned = CASES[case]
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 24,
        "temperature": 0.7,
        "seed": 11,
        "reasoning_effort": "medium" if pinned is None else "low",
    }
    if pinned is not None:
        body["ttc"] = {**pinned, "token_budget": 400}
    before = engine_counts(stack)
    reply = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=120)
    after = engine_counts(stack)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    usage, ttc = data["usage"], data["ttc"]
    delta = {k: after[k] - before[k] for k in KINDS}
    assert delta["generated"] > 0

    assert usage["prompt_tokens"] == delta["prompt"], (case, usage, delta, ttc["spend"])
    assert usage["completion_tokens"] == delta["generated"], (case, usage, delta, ttc["spend"])
    assert usage["prompt_tokens_details"]["cached_tokens"] == delta["cached"], (case, usage, delta)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]

    spend = ttc["spend"]
    roles = ("policy", "verifier", "probe")
    assert usage["prompt_tokens"] == sum(spend[r]["prompt_tokens"] for r in roles)
    assert usage["completion_tokens"] == sum(spend[r]["generated_tokens"] for r in roles)
    answer = usage["completion_tokens"] - usage["completion_tokens_details"]["reasoning_tokens"]
    assert 0 <= answer <= usage["completion_tokens"]
    if pinned is None or pinned.get("strategy") != "beam_search":  # a beam's answer joins several steps
        assert answer <= 24
    if pinned is not None and pinned.get("verifier") in ("orm", "prm"):
        # Judges prefill (Score): their tokens are prompt tokens, and they generate nothing.
        assert spend["verifier"]["prompt_tokens"] > 0 and spend["verifier"]["generated_tokens"] == 0
        assert ttc["budget_used"]["verifier_calls"] >= 1
    if pinned is not None:  # a pinned strategy skips the probe
        assert spend["probe"] == {"prompt_tokens": 0, "cached_tokens": 0, "generated_tokens": 0}
    # Routed, whatever the estimator spent (the probe's samples, or nothing) is inside the
    # equalities above: the probe runs on the same engine.
