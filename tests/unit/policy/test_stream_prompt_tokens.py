"""A stream's first chunk reports the prompt's tokens, so a stream cut later still counts them.

The policy servicer over a fake engine that decodes one token every few milliseconds
(``fake_engine.py``), behind real gRPC on 127.0.0.1: the call's first chunk (and no other)
carries the prompt tokens and cache hits that the final usage reports; a first delta whose
text is held back still sends that chunk; an engine that keeps no prompt count of its own (a
remote server) has its prompt counted once it has decoded a token, also when the stream is
then cut.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from services.gen.ttc.v1 import policy_pb2, policy_pb2_grpc
from services.policy.metrics import PolicyMetrics
from tests.unit.policy.fake_engine import CACHED, PROMPT_TOKENS, Behaviour, StepEngine, counted, request, serve, settled


@pytest.fixture
async def served() -> AsyncIterator[tuple[Behaviour, PolicyMetrics, policy_pb2_grpc.PolicyStub]]:
    behaviour = Behaviour()
    async with serve(StepEngine(behaviour)) as (metrics, stub):
        yield behaviour, metrics, stub


def tokens(metrics: PolicyMetrics, kind: str) -> float:
    return counted(metrics, "ttc_tokens_total", kind=kind)


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
    await settled(lambda: tokens(metrics, "generated"))
    assert tokens(metrics, "prompt") == PROMPT_TOKENS
    assert tokens(metrics, "generated") >= 5
