"""A fake engine that decodes one token every few milliseconds, served by the real servicer.

Shared by the policy tests of what a call spends (``test_aborted_tokens.py``,
``test_stream_prompt_tokens.py``): a call cut short must have decoded a known, growing number
of tokens, so the engine is slow on purpose and keeps its ``Spent`` current as the engine
contract asks. ``serve`` puts it behind real gRPC on 127.0.0.1 with the service's own
interceptor, as ``services/policy/server.py`` does, so the servicer's accounting is the one
exercised, not a copy of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc

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

PROMPT_TOKENS = 9
CACHED = 4
STEP_S = 0.005
MODEL = "step"


@dataclass
class Behaviour:
    """How the engine's call starts: whether it counts its prompt into ``spent`` (the
    llama.cpp and vLLM engines do, a remote server's stream does not), and how many text-less
    deltas it streams first (text held back, as a stop-sequence scanner does)."""

    counts_prompt: bool = True
    silent_first: int = 0


class StepEngine(Engine):
    """One token per ``STEP_S`` per candidate, each written into ``spent`` as it is decoded;
    token ``k`` of a candidate reads ``t<k>``, and every candidate stops at ``max_tokens``."""

    kind = "fake"
    model_id = MODEL
    max_context = 100_000

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        self.behaviour = Behaviour() if behaviour is None else behaviour

    async def _decode(self, sampling: Sampling, spent: Spent) -> AsyncIterator[tuple[int, int]]:
        if self.behaviour.counts_prompt:
            spent.prompt_tokens, spent.cached_tokens = PROMPT_TOKENS, CACHED
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
        text = "".join(f"t{step}" for step in range(1, sampling.max_tokens + 1))
        completions = [Completion(i, text, "length", sampling.max_tokens, s) for i, s in enumerate(sampling.seeds)]
        return Generation(completions, prompt_tokens=PROMPT_TOKENS, cached_tokens=CACHED)

    async def generate_stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, spent: Spent | None = None
    ) -> AsyncIterator[StreamDelta]:
        spent = Spent() if spent is None else spent
        async for index, step in self._decode(sampling, spent):
            finish: FinishReason | None = "length" if step == sampling.max_tokens else None
            text = "" if step <= self.behaviour.silent_first and finish is None else f"t{step}"
            yield StreamDelta(index=index, text=text, finish_reason=finish, completion_tokens=step)

    async def score(
        self, prompt: Prompt, continuations: list[str], top_logprobs: int, request_id: str, spent: Spent | None = None
    ) -> Scoring:
        raise NotImplementedError("the spending tests never score")

    async def tokenize(self, prompt: Prompt) -> list[int]:
        return [1] * PROMPT_TOKENS

    async def stats(self) -> EngineStats:
        return EngineStats(kv_cache_utilization=0.0, running_requests=0, waiting_requests=0)


def request(n: int = 1, max_tokens: int = 10_000) -> policy_pb2.GenerateRequest:
    """A one-message call; the default ``max_tokens`` outlasts any test, to be cut short."""
    prompt = policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content="count")])
    return policy_pb2.GenerateRequest(input=prompt, sampling=policy_pb2.SamplingParams(n=n, max_tokens=max_tokens))


@asynccontextmanager
async def serve(engine: StepEngine) -> AsyncIterator[tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub]]:
    """The servicer over ``engine`` on a free port; yields its metrics and a connected stub."""
    metrics = PolicyMetrics(ServiceMetrics("policy", tokens_family=True, kv_cache_family=True), "fake", MODEL)
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
    """A sample of the policy's registry (0 where never incremented)."""
    value = metrics.base.registry.get_sample_value(name, {"service": "policy", "model": MODEL, **labels})
    return value or 0.0


async def settled(condition: Callable[[], object], *, tries: int = 200) -> None:
    """Wait (up to ``tries`` x 10 ms) for ``condition``: the server counts an aborted call once
    its handler has unwound, after the client has already seen the end. Returns either way;
    the caller's assertions then say what was, or was not, counted."""
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.01)
