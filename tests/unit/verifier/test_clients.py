"""The policy adapter against an in-process scripted Policy service: status sorting and auto concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.errors import InvalidArgument, Unavailable
from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.verifier.clients import GrpcPolicyScorer
from services.verifier.types import JudgePrompt, Message, PolicyError, PolicyRefused
from tests.helpers.processes import free_port


class FakePolicy(policy_pb2_grpc.PolicyServicer):
    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.list_calls = 0

    async def ListModels(
        self, request: policy_pb2.ListModelsRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.ListModelsResponse:
        self.list_calls += 1
        return policy_pb2.ListModelsResponse(models=[policy_pb2.ModelInfo(id="m", engine=self.engine)])

    async def Score(
        self, request: policy_pb2.ScoreRequest, context: grpc.aio.ServicerContext
    ) -> policy_pb2.ScoreResponse:
        if request.model == "unknown":
            raise InvalidArgument("unknown model", field="model")
        if request.model == "long":
            raise InvalidArgument("exceeds the context window", field="continuations[0]")
        if request.model == "slow":
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "too slow")
        assert request.input.messages[0].content == "judge"
        return policy_pb2.ScoreResponse(
            scores=[policy_pb2.ContinuationScore(total_logprob=-float(i)) for i, _ in enumerate(request.continuations)],
            usage=common_pb2.Usage(prompt_tokens=7),
        )


@pytest.fixture(params=["llamacpp", "vllm"])
async def policy(request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, FakePolicy]]:
    fake = FakePolicy(request.param)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_grpc(
            [ServicerBinding(fake, policy_pb2_grpc.add_PolicyServicer_to_server, "ttc.v1.Policy")],
            metrics=ServiceMetrics("policy"),
            host="127.0.0.1",
            port=port,
            metrics_port=free_port(),
            stop_event=stop,
            grace_seconds=0.1,
        )
    )
    target = f"127.0.0.1:{port}"
    for _ in range(100):
        async with grpc.aio.insecure_channel(target) as ch:
            try:
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.05)
    yield target, fake
    stop.set()
    await task


PROMPT = JudgePrompt(messages=(Message("user", "judge"),))


async def test_auto_concurrency_is_one_on_llamacpp_and_asked_once(policy: tuple[str, FakePolicy]) -> None:
    target, fake = policy
    scorer = GrpcPolicyScorer(target, timeout_s=5)
    try:
        expected = 1 if fake.engine == "llamacpp" else 16
        assert await scorer.parallelism() == expected
        assert await scorer.parallelism() == expected and fake.list_calls == 1
        assert await GrpcPolicyScorer(target, 5, concurrency=3).parallelism() == 3
    finally:
        await scorer.close()


async def test_statuses_are_sorted(policy: tuple[str, FakePolicy]) -> None:
    target, _ = policy
    scorer = GrpcPolicyScorer(target, timeout_s=5)
    try:
        result = await scorer.score(PROMPT, ["Yes", "No"], model="m")
        assert result.totals == [0.0, -1.0] and result.spend.prompt_tokens == 7 and result.spend.policy_calls == 1
        with pytest.raises(InvalidArgument) as bad_model:
            await scorer.score(PROMPT, ["Yes"], model="unknown")
        assert bad_model.value.field == "model"
        with pytest.raises(PolicyRefused):
            await scorer.score(PROMPT, ["Yes"], model="long")
        with pytest.raises(PolicyError) as slow:
            await scorer.score(PROMPT, ["Yes"], model="slow")
        assert not isinstance(slow.value, PolicyRefused)
    finally:
        await scorer.close()


async def test_a_judge_model_with_its_own_deployment_is_scored_there(policy: tuple[str, FakePolicy]) -> None:
    """TTC_VERIFIER_POLICY_TARGETS: a stronger judge's calls go to its deployment, others to the default."""
    target, _ = policy
    dead = f"127.0.0.1:{free_port()}"  # nothing listens: a call routed there is UNAVAILABLE
    scorer = GrpcPolicyScorer(dead, timeout_s=5, targets={"judge-large": target})
    try:
        result = await scorer.score(PROMPT, ["Yes", "No"], model="judge-large")
        assert result.totals == [0.0, -1.0]
        with pytest.raises(Unavailable, match=f"policy service at {dead} is unavailable"):
            await scorer.score(PROMPT, ["Yes"], model="m")
    finally:
        await scorer.close()
