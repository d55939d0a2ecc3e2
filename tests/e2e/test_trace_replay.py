"""Search traces fetched through the gateway replay to the same choices.

A real stack — Redis, the policy service on SmolLM2 (llama.cpp, deterministic for a fixed
seed), the verifier service judging with the policy's logprobs, a Celery worker and the
gateway — runs MCTS and AB-MCTS pinned through the ``ttc`` extension. The stored trace is read
back over HTTP, and the same job is re-run from it against the same services: every decision
(which node grew from which, by which action and seed, and which path was chosen) and every
generated text must be the same.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.protobuf import json_format

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import orchestrator_pb2
from services.orchestrator.clients import GrpcPolicy, GrpcVerifier
from services.search.run import replay
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer, ServiceProcess, free_port, grpc_healthy

pytestmark = pytest.mark.e2e
PROMPT = "Tom has 3 apples and buys 4 more. How many apples does he have?"


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[tuple[GatewayStack, str]]:
    s = GatewayStack(redis_server)
    verifier: ServiceProcess | None = None
    try:
        # Exact replay needs the same logits for the same call: one request at a time, each
        # prefilled alone (no prefix copied from an earlier request's cells, computed in other
        # batches); batched or reusing, calls may round differently (docs/policy.md).
        s.start_policy({"TTC_POLICY_PARALLEL_REQUESTS": "1", "TTC_POLICY_RETAINED_PROMPTS": "0"})
        verifier_port = free_port()
        verifier = ServiceProcess(
            "verifier",
            {
                "TTC_VERIFIER_HOST": "127.0.0.1",
                "TTC_VERIFIER_PORT": str(verifier_port),
                "TTC_VERIFIER_METRICS_PORT": str(free_port()),
                "TTC_VERIFIER_POLICY_TARGET": s.policy_target,
                "TTC_VERIFIER_SANDBOX_TARGET": f"127.0.0.1:{free_port()}",
            },
        ).start()
        verifier_target = f"127.0.0.1:{verifier_port}"
        verifier.wait_until(lambda: grpc_healthy(verifier_target), timeout=120)
        s.worker_env["TTC_ORCHESTRATOR_VERIFIER_TARGET"] = verifier_target
        s.start_worker(concurrency=1)
        s.start_gateway()
        yield s, verifier_target
    finally:
        s.stop()
        if verifier is not None:
            verifier.stop()


async def _replay(trace: orchestrator_pb2.SearchTrace, policy_target: str, verifier_target: str) -> Any:
    async with insecure_channel(policy_target) as policy_channel, insecure_channel(verifier_target) as verifier_channel:
        return await replay(trace, GrpcPolicy(policy_channel, MODEL), GrpcVerifier(verifier_channel, MODEL))


@pytest.mark.parametrize(
    ("strategy", "params"),
    [
        ("mcts", {"simulations": 3, "expansion_width": 2, "step_max_tokens": 24}),
        ("ab_mcts_a", {"batch": 2, "max_depth": 2}),
    ],
)
def test_trace_fetched_through_the_gateway_replays_to_the_same_choices(
    stack: tuple[GatewayStack, str], strategy: str, params: dict[str, Any]
) -> None:
    s, verifier_target = stack
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 48,
        "temperature": 0.8,
        "seed": 1234,
        "ttc": {"strategy": strategy, "n": 3, "verifier": "orm", "params": params},
    }
    reply = httpx.post(f"{s.url}/v1/chat/completions", json=body, timeout=600)
    assert reply.status_code == 200, reply.text
    report = reply.json()["ttc"]
    assert report["strategy"] == strategy
    trace_id = report["trace_id"]
    assert trace_id

    fetched = httpx.get(f"{s.url}/v1/traces/{trace_id}", timeout=30)
    assert fetched.status_code == 200, fetched.text
    trace = json_format.ParseDict(fetched.json(), orchestrator_pb2.SearchTrace(), ignore_unknown_fields=True)
    assert trace.job.strategy.name == strategy
    actions = {node.action for node in trace.nodes}
    assert len(trace.nodes) > 2, "a search expands more than the prompt and one answer"
    assert any(node.chosen for node in trace.nodes[1:]), "the chosen path is marked"
    assert trace.result.termination != orchestrator_pb2.TERMINATION_ERROR, trace.result.error
    assert actions - {"prompt"}, actions

    comparison, result, _ = asyncio.run(_replay(trace, s.policy_target, verifier_target))
    assert comparison.matches, f"replay diverged at decision {comparison.first_divergence}"
    assert comparison.texts_match
    assert comparison.original_decisions == comparison.replayed_decisions == len(trace.nodes)
    assert result.answer == trace.result.answer


def test_unknown_trace_is_a_404_with_an_openai_error(stack: tuple[GatewayStack, str]) -> None:
    s, _ = stack
    reply = httpx.get(f"{s.url}/v1/traces/does-not-exist", timeout=30)
    assert reply.status_code == 404
    assert reply.json()["error"]["param"] == "trace_id"
