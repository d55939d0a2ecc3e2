"""The worker's meter charges a streamed call's prompt exactly once, whether the stream is cut
or finishes.

The real policy servicer (over tests/unit/policy's step engine: a token every 5 ms, its prompt
and cache hits in its ``Spent``) behind real gRPC on 127.0.0.1, the worker's ``GrpcPolicy``
(``stream_always``) and its ``MeteredPolicy``: a call cancelled mid-stream charges the prompt
its first chunk reported, with its cached tokens; a call that finishes charges the final
usage's prompt, not that and the first chunk's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.common.grpc_client import insecure_channel
from services.common.metrics import ServiceMetrics
from services.orchestrator.clients import GrpcPolicy
from services.orchestrator.metering import Meter, MeteredPolicy
from services.policy.metrics import PolicyMetrics
from services.policy.servicer import PolicyServicer
from services.policy.settings import PolicySettings
from services.search.interfaces import GenerateCall, Generation, Message
from tests.unit.orchestrator.policy_server import serving
from tests.unit.policy.test_stream_prompt_tokens import CACHED, PROMPT_TOKENS, Behaviour, StepEngine


@pytest.fixture
async def target() -> AsyncIterator[str]:
    metrics = PolicyMetrics(ServiceMetrics("policy", tokens_family=True, kv_cache_family=True), "fake", "step")
    async with serving(PolicyServicer(StepEngine(Behaviour()), PolicySettings(), metrics)) as address:
        yield address


def _call(n: int, max_tokens: int) -> GenerateCall:
    return GenerateCall((Message("user", "count"),), n=n, seeds=tuple(range(1, n + 1)), max_tokens=max_tokens)


async def test_a_cancelled_stream_charges_its_prompt_once(target: str) -> None:
    meter = Meter()
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        policy = MeteredPolicy(GrpcPolicy(channel, stream_always=True), meter)
        call = asyncio.ensure_future(policy.generate(_call(2, 10_000), on_partial=partial.append))
        # some 240 steps decoded; sent in chunks of USAGE_CHUNK_INTERVAL_MS (0.5 s), so at least two
        await asyncio.sleep(1.2)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    [got] = partial
    used = meter.usage()
    assert (used.prompt_tokens, used.cached_tokens, used.policy_calls) == (PROMPT_TOKENS, CACHED, 1)
    assert (got.prompt_tokens, got.cached_tokens) == (PROMPT_TOKENS, CACHED)
    assert 20 <= used.generated_tokens == sum(c.completion_tokens for c in got.candidates) < 2000


async def test_a_finished_stream_charges_the_final_usage_not_the_first_chunk_too(target: str) -> None:
    meter = Meter()
    async with insecure_channel(target) as channel:
        policy = MeteredPolicy(GrpcPolicy(channel, stream_always=True), meter)
        first = await policy.generate(_call(2, 4))
        await policy.generate(_call(1, 3))
    assert (first.prompt_tokens, first.cached_tokens) == (PROMPT_TOKENS, CACHED)
    used = meter.usage()
    assert (used.prompt_tokens, used.cached_tokens) == (2 * PROMPT_TOKENS, 2 * CACHED)  # two calls, once each
    assert (used.generated_tokens, used.policy_calls) == (2 * 4 + 3, 2)
