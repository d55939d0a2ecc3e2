"""Coarse stream chunks (``GenerateRequest.chunk_interval_ms``): merged per candidate, never late
where it matters.

The pure window with a hand-driven clock, then the servicer over the step engine behind real
gRPC (``fake_engine.py``): the same text, token counts and usage as per-token chunks, in fewer
chunks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.policy.chunk_window import ChunkWindow
from tests.unit.policy.fake_engine import PROMPT_TOKENS, StepEngine, request, serve

STOP = policy_pb2.FINISH_REASON_STOP


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def chunk(index: int, text: str, tokens: int, **kw: object) -> policy_pb2.GenerateChunk:
    logprobs = [common_pb2.TokenLogprob(token=text, logprob=-0.5)]
    return policy_pb2.GenerateChunk(index=index, text_delta=text, completion_tokens=tokens, logprobs=logprobs, **kw)


def test_no_interval_passes_every_chunk_on() -> None:
    window = ChunkWindow(0)
    assert [c.text_delta for c in window.add(chunk(0, "a", 1)) + window.add(chunk(0, "b", 2))] == ["a", "b"]
    assert window.drain() == []


def test_chunks_inside_the_interval_are_merged_per_candidate() -> None:
    clock = Clock()
    window = ChunkWindow(0.5, clock)
    [first] = window.add(chunk(0, "a", 1, prompt_tokens=7))  # the prompt's count goes out at once
    assert first.prompt_tokens == 7
    assert window.add(chunk(1, "x", 1)) == [] and window.add(chunk(0, "b", 2)) == []
    assert window.add(chunk(1, "y", 2)) == []
    clock.now = 0.6
    out = window.add(chunk(0, "c", 3))
    assert [(c.index, c.text_delta, c.completion_tokens) for c in out] == [(1, "xy", 2), (0, "bc", 3)]
    assert [t.token for t in out[1].logprobs] == ["b", "c"]
    assert window.add(chunk(0, "d", 4)) == []  # the interval starts again at the hand-over


def test_a_finished_candidate_goes_out_at_once_and_alone() -> None:
    clock = Clock()
    window = ChunkWindow(10, clock)
    window.add(chunk(0, "a", 1, prompt_tokens=3))
    window.add(chunk(1, "x", 1))
    window.add(chunk(0, "b", 2))
    [done] = window.add(chunk(0, "", 2, finish_reason=STOP))
    assert (done.index, done.text_delta, done.finish_reason) == (0, "b", STOP)
    [rest] = window.drain()
    assert (rest.index, rest.text_delta) == (1, "x")


@pytest.fixture
async def stub() -> AsyncIterator[policy_pb2_grpc.PolicyStub]:
    async with serve(StepEngine()) as (_, stub):
        yield stub


async def test_the_servicer_sends_fewer_chunks_with_the_same_text_and_usage(stub: policy_pb2_grpc.PolicyStub) -> None:
    fine = [c async for c in stub.GenerateStream(request(n=2, max_tokens=6), timeout=30)]
    coarse_request = request(n=2, max_tokens=6)
    coarse_request.chunk_interval_ms = 60_000
    coarse = [c async for c in stub.GenerateStream(coarse_request, timeout=30)]

    def texts(chunks: list[policy_pb2.GenerateChunk]) -> dict[int, str]:
        out: dict[int, str] = {}
        for c in chunks:
            if not c.HasField("usage"):
                out[c.index] = out.get(c.index, "") + c.text_delta
        return out

    assert texts(coarse) == texts(fine) == {0: "t1t2t3t4t5t6", 1: "t1t2t3t4t5t6"}
    assert coarse[-1].usage == fine[-1].usage and coarse[-1].usage.completion_tokens == 12
    # the first chunk (with the prompt), one final chunk per candidate, the usage
    assert len(coarse) == 4 < len(fine)
    assert coarse[0].prompt_tokens == PROMPT_TOKENS
    assert {c.index: c.completion_tokens for c in coarse[1:3]} == {0: 6, 1: 6}


async def test_a_deadline_sends_what_the_window_held_before_the_error(stub: policy_pb2_grpc.PolicyStub) -> None:
    """A call cut by its deadline still tells its caller everything decoded, not one window less."""
    coarse = request(max_tokens=10_000)
    coarse.chunk_interval_ms = 60_000
    seen: list[policy_pb2.GenerateChunk] = []
    with pytest.raises(grpc.aio.AioRpcError) as cut:
        async for c in stub.GenerateStream(coarse, timeout=0.5):
            seen.append(c)
    assert cut.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    first, held = seen  # the prompt's chunk at once, the rest when the deadline came
    assert first.prompt_tokens == PROMPT_TOKENS
    assert held.completion_tokens > 20 and held.text_delta.startswith("t2t3")
