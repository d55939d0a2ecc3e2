"""A stream's first chunk reports the prompt's tokens, so a stream cut later still counts them.

The policy servicer over a fake engine that decodes one token every few milliseconds, behind
real gRPC on 127.0.0.1: the call's first chunk (and no other) carries the prompt tokens and
cache hits that the final usage reports; a first delta whose text is held back still sends
that chunk; an engine that keeps no prompt count of its own (a remote server) has its prompt
counted once it has decoded a token, also when the stream is then cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import pytest

from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.policy.engines.base import (
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

PROMPT_TOKENS = 9
CACHED = 4
STEP_S = 0.005


@dataclass
class Behaviour:
    """How the fake engine's stream starts: whether it counts its prompt into ``spent`` (the
    llama.cpp and vLLM engines do, a remote server's stream does not), and how many text-less
    deltas it sends first (text held back, as a stop-sequence scanner does)."""

    counts_prompt: bool = True
    silent_first: int = 0


class StepEngine(Engine):
    kind = "fake"
    model_id = "step"
    max_context = 100_000

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> Generation:
        raise NotImplementedError

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        spent = Spent() if spent is None else spent
        if self.behaviour.counts_prompt:
            spent.prompt_tokens, spent.cached_tokens = PROMPT_TOKENS, CACHED
        for step in range(1, sampling.max_tokens + 1):
            await asyncio.sleep(STEP_S)
            for index in range(sampling.n):
                spent.completion_tokens += 1
                finish: FinishReason | None = "length" if step == sampling.max_tokens else None
                text = "" if step <= self.behaviour.silent_first and finish is None else f"t{step}"
                yield StreamDelta(index, text, finish, step)

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
async def served() -> AsyncIterator[tuple[Behaviour, PolicyMetrics, policy_pb2_grpc.PolicyStub]]:
    behaviour = Behaviour()
    metrics = PolicyMetrics(ServiceMetrics("policy", tokens_family=True, kv_cache_family=True), "fake", "step")
    server = grpc.aio.server()
    servicer = PolicyServicer(StepEngine(behaviour), PolicySettings(), metrics)
    policy_pb2_grpc.add_PolicyServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield behaviour, metrics, policy_pb2_grpc.PolicyStub(channel)
    finally:
        await server.stop(None)


def counted(metrics: PolicyMetrics, kind: str) -> float:
    labels = {"service": "policy", "model": "step", "kind": kind}
    return metrics.base.registry.get_sample_value("ttc_tokens_total", labels) or 0.0


async def test_only_the_first_chunk_reports_the_prompt_as_the_final_usage_does(
    served: tuple[Behaviour, PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    _, _, stub = served
    chunks = [chunk async for chunk in stub.GenerateStream(request(n=2, max_tokens=3), timeout=30)]
    first, *rest, final = chunks
    assert (first.prompt_tokens, first.cached_tokens) == (PROMPT_TOKENS, CACHED)
    assert first.text_delta  # a chunk of the call's first candidate, not one of its own
    assert len(rest) == 5 and all(c.prompt_tokens == c.cached_tokens == 0 for c in rest)
    assert (final.usage.prompt_tokens, final.usage.cached_tokens) == (PROMPT_TOKENS, CACHED)
    assert final.prompt_tokens == 0


async def test_a_first_delta_without_text_still_reports_the_prompt(
    served: tuple[Behaviour, PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    behaviour, _, stub = served
    behaviour.silent_first = 3
    chunks = [chunk async for chunk in stub.GenerateStream(request(max_tokens=6), timeout=30)]
    # the first text-less delta goes out for the count; the next two are held back as before
    assert [(c.text_delta, c.prompt_tokens) for c in chunks[:-1]] == [
        ("", PROMPT_TOKENS),
        ("t4", 0),
        ("t5", 0),
        ("t6", 0),
    ]
    assert chunks[0].completion_tokens == 1


async def test_a_cut_stream_counts_a_prompt_its_engine_did_not(
    served: tuple[Behaviour, PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    behaviour, metrics, stub = served
    behaviour.counts_prompt = False
    call = stub.GenerateStream(request(), timeout=30)
    seen: list[policy_pb2.GenerateChunk] = []
    async for chunk in call:
        seen.append(chunk)
        if len(seen) == 5:
            break
    call.cancel()
    assert (seen[0].prompt_tokens, seen[0].cached_tokens) == (PROMPT_TOKENS, 0)  # no cache hits known
    for _ in range(200):  # the server counts the abort once its handler has unwound
        if counted(metrics, "generated"):
            break
        await asyncio.sleep(0.01)
    assert counted(metrics, "prompt") == PROMPT_TOKENS
    assert counted(metrics, "generated") >= 5
