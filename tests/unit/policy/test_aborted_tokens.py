"""Tokens an engine decoded for a call that never finished are counted.

The policy servicer over an engine that decodes one token every few milliseconds (and keeps
its ``Spent`` current, as the engine contract asks), behind real gRPC on 127.0.0.1 with the
service's interceptor: a call cut off by its deadline or cancelled by its client still moves
``ttc_tokens_total`` by what was decoded, and ``ttc_policy_aborted_tokens_total`` by reason;
a stream's chunks carry each candidate's running count.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from services.common.grpc_server import ObservabilityInterceptor
from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.policy.engines.base import (
    Completion,
    Engine,
    EngineStats,
    FinishReason,
    Generation,
    Prompt,
    Sampling,
    Scoring,
    Spent,
    StreamDelta,
)
from services.policy.metrics import PolicyMetrics
from services.policy.servicer import PolicyServicer
from services.policy.settings import PolicySettings

PROMPT_TOKENS = 5
STEP_S = 0.005


class SlowEngine(Engine):
    """One token per ``STEP_S`` per candidate; every token written into ``spent`` as decoded."""

    kind = "fake"
    model_id = "slow"
    max_context = 100_000

    async def _decode(self, sampling: Sampling, spent: Spent) -> AsyncIterator[tuple[int, int]]:
        spent.prompt_tokens = PROMPT_TOKENS
        for step in range(1, sampling.max_tokens + 1):
            await asyncio.sleep(STEP_S)
            for index in range(sampling.n):
                spent.completion_tokens += 1
                yield index, step

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        spent = Spent() if spent is None else spent
        async for _ in self._decode(sampling, spent):
            pass
        completions = [Completion(i, "x", "length", sampling.max_tokens, s) for i, s in enumerate(sampling.seeds)]
        return Generation(completions, prompt_tokens=PROMPT_TOKENS)

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        spent = Spent() if spent is None else spent
        async for index, step in self._decode(sampling, spent):
            finish: FinishReason | None = "length" if step == sampling.max_tokens else None
            yield StreamDelta(index, "x", finish, step)

    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
        raise NotImplementedError

    async def tokenize(self, prompt: Prompt) -> list[int]:
        return [1] * PROMPT_TOKENS

    async def stats(self) -> EngineStats:
        return EngineStats(kv_cache_utilization=0.0, running_requests=0, waiting_requests=0)


def request(n: int = 1, max_tokens: int = 10_000) -> policy_pb2.GenerateRequest:
    prompt = policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content="count")])
    return policy_pb2.GenerateRequest(input=prompt, sampling=policy_pb2.SamplingParams(n=n, max_tokens=max_tokens))


@pytest.fixture
async def served() -> AsyncIterator[tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub]]:
    engine = SlowEngine()
    metrics = PolicyMetrics(ServiceMetrics("policy", tokens_family=True, kv_cache_family=True), "fake", "slow")
    server = grpc.aio.server(interceptors=[ObservabilityInterceptor(metrics.base)])
    policy_pb2_grpc.add_PolicyServicer_to_server(PolicyServicer(engine, PolicySettings(), metrics), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield metrics, policy_pb2_grpc.PolicyStub(channel)
    finally:
        await server.stop(None)


def counted(metrics: PolicyMetrics, name: str, **labels: str) -> float:
    value = metrics.base.registry.get_sample_value(name, {"service": "policy", "model": "slow", **labels})
    return value or 0.0


async def settled(metrics: PolicyMetrics, reason: str) -> None:
    """The server counts an abort once its handler has unwound, after the client saw the end."""
    for _ in range(200):
        if counted(metrics, "ttc_policy_aborted_requests_total", reason=reason):
            return
        await asyncio.sleep(0.01)


async def test_a_unary_call_past_its_deadline_counts_what_was_decoded(
    served: tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    metrics, stub = served
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Generate(request(n=2), timeout=0.5)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await settled(metrics, "deadline")
    generated = counted(metrics, "ttc_tokens_total", kind="generated")
    # about 0.45 s of 5 ms steps, two candidates: far from none, far from the 20,000 asked for
    assert 20 <= generated < 1000
    assert counted(metrics, "ttc_policy_aborted_tokens_total", reason="deadline") == generated
    assert counted(metrics, "ttc_tokens_total", kind="prompt") == PROMPT_TOKENS


async def test_a_cancelled_stream_counts_what_was_decoded_and_its_chunks_say_so(
    served: tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    metrics, stub = served
    call = stub.GenerateStream(request(), timeout=30)
    seen: list[int] = []
    async for chunk in call:
        seen.append(chunk.completion_tokens)
        if len(seen) == 25:
            break
    call.cancel()
    assert seen == list(range(1, 26))  # each chunk: the candidate's tokens so far
    await settled(metrics, "cancelled")
    generated = counted(metrics, "ttc_tokens_total", kind="generated")
    assert 25 <= generated < 1000
    assert counted(metrics, "ttc_policy_aborted_tokens_total", reason="cancelled") == generated


async def test_a_finished_call_is_counted_once_and_is_no_abort(
    served: tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    metrics, stub = served
    reply = await stub.Generate(request(n=2, max_tokens=3), timeout=30)
    assert reply.usage.completion_tokens == 6
    chunks = [chunk async for chunk in stub.GenerateStream(request(max_tokens=3), timeout=30)]
    assert chunks[-1].usage.completion_tokens == 3
    assert counted(metrics, "ttc_tokens_total", kind="generated") == 9
    assert not counted(metrics, "ttc_policy_aborted_tokens_total", reason="cancelled")
