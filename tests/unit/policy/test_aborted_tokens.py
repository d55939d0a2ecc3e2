"""Tokens an engine decoded for a call that never finished are counted.

The policy servicer over an engine that decodes one token every few milliseconds and keeps
its ``Spent`` current, as the engine contract asks (``fake_engine.py``), behind real gRPC on
127.0.0.1 with the service's interceptor: a call cut off by its deadline or cancelled by its
client still moves ``ttc_tokens_total`` by what was decoded, and
``ttc_policy_aborted_tokens_total`` by reason; a stream's chunks carry each candidate's
running count.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from services.gen.ttc.v1 import policy_pb2_grpc
from services.policy.metrics import PolicyMetrics
from tests.unit.policy.fake_engine import PROMPT_TOKENS, StepEngine, counted, request, serve, settled


@pytest.fixture
async def served() -> AsyncIterator[tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub]]:
    async with serve(StepEngine()) as metrics_and_stub:
        yield metrics_and_stub


def aborted(metrics: PolicyMetrics, reason: str) -> float:
    return counted(metrics, "ttc_policy_aborted_requests_total", reason=reason)


async def test_a_unary_call_past_its_deadline_counts_what_was_decoded(
    served: tuple[PolicyMetrics, policy_pb2_grpc.PolicyStub],
) -> None:
    metrics, stub = served
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Generate(request(n=2), timeout=0.5)
    assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await settled(lambda: aborted(metrics, "deadline"))
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
    await settled(lambda: aborted(metrics, "cancelled"))
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
