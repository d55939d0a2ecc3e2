"""``GrpcPolicy`` assembles a streamed call's per-token logprobs into the candidates the unary
call gives, and a stream cut short hands the logprobs it received on with its tokens.

Real gRPC on 127.0.0.1 against an in-process policy whose Generate and GenerateStream answer
the same two candidates: the stream interleaves them, splits their tokens over several chunks
(one chunk with a token and no text: the first half of a character) and may stall
after its first chunks instead of finishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.orchestrator.clients import GrpcPolicy
from services.search.interfaces import GenerateCall, Generation, Message
from tests.unit.orchestrator.policy_server import serving

#: per candidate: (text, tokens) per chunk
CHUNKS = {
    0: [("The", ["The"]), (" answer", [" answer"]), (" is 42", [" is", " 42"])],
    1: [("It", ["It"]), ("", ["\\xc3"]), ("é 7", ["\\xa9", " 7"])],
}


def token(text: str, i: int) -> common_pb2.TokenLogprob:
    top = [
        common_pb2.TopLogprob(token=text, token_id=i, logprob=-0.1 * i),
        common_pb2.TopLogprob(token="x", logprob=-5),
    ]
    return common_pb2.TokenLogprob(token=text, token_id=i, logprob=-0.1 * i, top_logprobs=top)


def tokens(index: int) -> list[common_pb2.TokenLogprob]:
    texts = [t for _, chunk in CHUNKS[index] for t in chunk]
    return [token(t, 10 * index + i) for i, t in enumerate(texts)]


class TwinPolicy(policy_pb2_grpc.PolicyServicer):
    """The same two candidates, unary or streamed; ``stall`` stops the stream after the
    first chunk of each candidate."""

    def __init__(self) -> None:
        self.stall = False
        self.sent = asyncio.Event()
        self.requests: list[policy_pb2.GenerateRequest] = []

    async def Generate(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        candidates = [
            policy_pb2.Candidate(
                index=i,
                text="".join(text for text, _ in CHUNKS[i]),
                finish_reason=policy_pb2.FINISH_REASON_STOP,
                completion_tokens=len(tokens(i)),
                seed=request.sampling.seeds[i],
                logprobs=tokens(i),
            )
            for i in CHUNKS
        ]
        return policy_pb2.GenerateResponse(candidates=candidates, usage=common_pb2.Usage(prompt_tokens=5))

    async def GenerateStream(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        counts, at = {0: 0, 1: 0}, {0: 0, 1: 0}
        for step in range(3):
            for i in CHUNKS:
                text, chunk_tokens = CHUNKS[i][step]
                sent = tokens(i)[counts[i] : counts[i] + len(chunk_tokens)]
                counts[i] += len(chunk_tokens)
                at[i] += 1
                last = at[i] == len(CHUNKS[i])
                yield policy_pb2.GenerateChunk(
                    index=i,
                    text_delta=text,
                    completion_tokens=counts[i],
                    logprobs=sent,
                    finish_reason=policy_pb2.FINISH_REASON_STOP if last else policy_pb2.FINISH_REASON_UNSPECIFIED,
                    prompt_tokens=5 if step == i == 0 else 0,
                )
            if self.stall:
                self.sent.set()
                await asyncio.sleep(3600)
        yield policy_pb2.GenerateChunk(usage=common_pb2.Usage(prompt_tokens=5, completion_tokens=sum(counts.values())))


@pytest.fixture
async def twin() -> AsyncIterator[tuple[TwinPolicy, str]]:
    fake = TwinPolicy()
    async with serving(fake) as target:
        yield fake, target


def _call() -> GenerateCall:
    return GenerateCall((Message("user", "q"),), n=2, seeds=(3, 4), max_tokens=16, logprobs=True)


async def test_a_streamed_calls_candidates_are_the_unary_calls_logprobs_and_all(twin: tuple[TwinPolicy, str]) -> None:
    fake, target = twin
    texts: list[tuple[int, str]] = []

    async def on_text(index: int, delta: str) -> None:
        texts.append((index, delta))

    async with insecure_channel(target) as channel:
        unary = await GrpcPolicy(channel).generate(_call())
        streamed = await GrpcPolicy(channel).generate(_call(), on_text=on_text)
        quiet = await GrpcPolicy(channel, stream_always=True).generate(_call())
    assert len(fake.requests) == 3 and all(r.sampling.logprobs for r in fake.requests)
    assert streamed == unary == quiet
    assert [len(c.logprobs) for c in streamed.candidates] == [4, 4]
    assert streamed.candidates[1].tokens[1].token == "\\xc3" and streamed.candidates[0].tokens[0].top[1] == ("x", -5)
    assert [d for i, d in texts if i == 1] == ["It", "é 7"]  # text deltas still stream as they come


async def test_a_cut_stream_hands_on_the_logprobs_it_received(twin: tuple[TwinPolicy, str]) -> None:
    fake, target = twin
    fake.stall = True
    partial: list[Generation] = []
    async with insecure_channel(target) as channel:
        call = asyncio.ensure_future(
            GrpcPolicy(channel, stream_always=True).generate(_call(), on_partial=partial.append)
        )
        await asyncio.wait_for(fake.sent.wait(), 10)
        await asyncio.sleep(0.2)  # the chunks are on their way
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    [got] = partial
    assert [c.text for c in got.candidates] == ["The", "It"]
    assert [c.completion_tokens for c in got.candidates] == [1, 1]
    assert [[t.token for t in c.tokens] for c in got.candidates] == [["The"], ["It"]]
    assert got.prompt_tokens == 5
