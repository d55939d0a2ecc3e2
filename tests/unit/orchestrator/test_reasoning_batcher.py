"""The worker's reasoning batcher, and the reasoning a job streams end to end over gRPC.

The batcher turns one delta per token of every candidate into one job event per window; the
servicer test runs a real search (self-consistency, three candidates) over a real gRPC policy
stream whose candidates interleave, as the engine's do, and reads the job's events in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2, policy_pb2_grpc
from services.orchestrator.clients import GrpcPolicy
from services.orchestrator.reasoning import ReasoningBatcher
from services.search.interfaces import ReasoningDelta
from tests.helpers.search_jobs import make_job

WORDS = ("The", " answer", " is", " 42.")


def collector() -> tuple[list[orchestrator_pb2.ReasoningDeltas], ReasoningBatcher]:
    sent: list[orchestrator_pb2.ReasoningDeltas] = []

    async def publish(batch: orchestrator_pb2.ReasoningDeltas) -> None:
        sent.append(batch)

    return sent, ReasoningBatcher(publish, window_s=0.05)


async def test_a_window_of_many_candidates_tokens_is_one_event_per_window() -> None:
    sent, batcher = collector()
    for word in range(20):
        for candidate in range(8):
            batcher.add(ReasoningDelta(f"candidate {candidate + 1}", "tokens", f"w{word} "))
    batcher.add(ReasoningDelta("vote", "event", "tally of 8: '42': 8"))
    assert sent == []  # nothing goes out before the window closes
    await asyncio.sleep(0.15)
    assert len(sent) == 1 and batcher.published == 1
    deltas = [(d.source, d.kind, d.text) for d in sent[0].deltas]
    expected = "".join(f"w{w} " for w in range(20))
    assert deltas == [(f"candidate {c + 1}", "tokens", expected) for c in range(8)] + [
        ("vote", "event", "tally of 8: '42': 8")
    ]


async def test_flush_sends_at_once_keeps_a_sources_order_and_sends_nothing_twice() -> None:
    sent, batcher = collector()
    batcher.add(ReasoningDelta("program 1", "tokens", "print("))
    batcher.add(ReasoningDelta("program 1", "tokens", "42)"))
    batcher.add(ReasoningDelta("program 1", "event", "ran ok, printed: 42"))
    batcher.add(ReasoningDelta("program 1", "event", "abstains"))
    await batcher.flush()  # before the result: no waiting for the window
    assert [(d.kind, d.text) for d in sent[0].deltas] == [
        ("tokens", "print(42)"),
        ("event", "ran ok, printed: 42"),
        ("event", "abstains"),
    ]
    await asyncio.sleep(0.1)
    await batcher.flush()
    assert len(sent) == 1  # the cancelled window and the empty flush sent nothing more


async def test_close_drops_what_a_cancelled_job_had_buffered() -> None:
    sent, batcher = collector()
    batcher.add(ReasoningDelta("candidate 1", "tokens", "x"))
    batcher.close()
    await asyncio.sleep(0.1)
    assert sent == []


async def test_a_failing_publish_is_logged_and_the_job_goes_on() -> None:
    async def down(batch: orchestrator_pb2.ReasoningDeltas) -> None:
        raise ConnectionError("redis down")

    batcher = ReasoningBatcher(down, window_s=0.01)
    batcher.add(ReasoningDelta("candidate 1", "tokens", "x"))
    await batcher.flush()
    assert batcher.published == 0


class InterleavingPolicy(policy_pb2_grpc.PolicyServicer):
    """Streams every candidate's words interleaved (as a batched engine decodes them); the
    unary Generate answers the same text at once."""

    def __init__(self) -> None:
        self.streams = 0
        self.unary = 0

    async def GenerateStream(self, request, context):  # type: ignore[no-untyped-def]
        self.streams += 1
        n = request.sampling.n
        for k, word in enumerate(WORDS, start=1):
            for i in range(n):
                yield policy_pb2.GenerateChunk(index=i, text_delta=word, completion_tokens=k)
            await asyncio.sleep(0.005)
        for i in range(n):
            yield policy_pb2.GenerateChunk(index=i, finish_reason=policy_pb2.FINISH_REASON_STOP, completion_tokens=4)
        yield policy_pb2.GenerateChunk(usage=common_pb2.Usage(prompt_tokens=10, completion_tokens=4 * n))

    async def Generate(self, request, context):  # type: ignore[no-untyped-def]
        self.unary += 1
        return policy_pb2.GenerateResponse(
            candidates=[
                policy_pb2.Candidate(
                    index=i,
                    text="".join(WORDS),
                    finish_reason=policy_pb2.FINISH_REASON_STOP,
                    completion_tokens=4,
                    seed=request.sampling.seeds[i],
                )
                for i in range(request.sampling.n)
            ],
            usage=common_pb2.Usage(prompt_tokens=10, completion_tokens=4 * request.sampling.n),
        )


class Traces:
    async def save(self, trace: orchestrator_pb2.SearchTrace, owner: str = "") -> None:
        del trace, owner


@pytest.fixture
async def served() -> AsyncIterator[tuple[InterleavingPolicy, grpc.aio.Channel]]:
    server = grpc.aio.server()
    fake = InterleavingPolicy()
    policy_pb2_grpc.add_PolicyServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with insecure_channel(f"127.0.0.1:{port}") as channel:
            yield fake, channel
    finally:
        await server.stop(None)


async def _events(channel: grpc.aio.Channel, *, quiet: bool) -> list[orchestrator_pb2.JobEvent]:
    from services.orchestrator.adapters import AdapterFactory
    from services.orchestrator.servicer import OrchestratorServicer

    async def policy_for(model: str, job: orchestrator_pb2.SearchJob, timeout: float) -> GrpcPolicy:
        return GrpcPolicy(channel, model, request_id=job.job_id, timeout=timeout)

    servicer = OrchestratorServicer(AdapterFactory(policy_for, channel, channel), Traces())  # type: ignore[arg-type]
    job = make_job("self_consistency", n=3, params={"logprobs": False})
    job.stream_answer, job.quiet = True, quiet
    return [e async for e in servicer.RunSearch(job, None)]


async def test_a_search_streams_its_candidates_tokens_then_the_tally_before_the_result(
    served: tuple[InterleavingPolicy, grpc.aio.Channel],
) -> None:
    fake, channel = served
    events = await _events(channel, quiet=False)
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "result" and fake.streams == 1 and fake.unary == 0
    first_answer = kinds.index("answer_delta")
    assert "reasoning" not in kinds[first_answer:]  # every reasoning event came before the answer
    assert [e.sequence for e in events] == sorted(e.sequence for e in events)
    deltas = [d for e in events if e.WhichOneof("event") == "reasoning" for d in e.reasoning.deltas]
    texts: dict[str, str] = {}
    for d in deltas:
        if d.kind == "tokens":
            texts[d.source] = texts.get(d.source, "") + d.text
    assert texts == {f"candidate {i}": "The answer is 42." for i in (1, 2, 3)}
    assert any(d.source == "vote" and d.kind == "event" and ": 3" in d.text for d in deltas)
    # Twelve token deltas (and the tally) in a few windows, not one event each.
    assert kinds.count("reasoning") < 12


async def test_a_quiet_job_gets_no_reasoning_and_no_stream(
    served: tuple[InterleavingPolicy, grpc.aio.Channel],
) -> None:
    fake, channel = served
    events = await _events(channel, quiet=True)
    assert "reasoning" not in [e.WhichOneof("event") for e in events]
    assert fake.streams == 0 and fake.unary == 1


async def test_a_job_sends_no_two_reasoning_events_closer_than_the_interval() -> None:
    """A decode step slower than the window would otherwise make one event per step."""
    sent: list[orchestrator_pb2.ReasoningDeltas] = []

    async def publish(batch: orchestrator_pb2.ReasoningDeltas) -> None:
        sent.append(batch)

    batcher = ReasoningBatcher(publish, window_s=0.01, min_interval_s=1.0)
    loop = asyncio.get_running_loop()
    batcher.add(ReasoningDelta("candidate 1", "tokens", "a"))
    await asyncio.sleep(0.1)
    assert len(sent) == 1  # the first event leaves one window after the first token
    first = loop.time()
    for step in range(3):  # three steps, each longer than the window
        batcher.add(ReasoningDelta("candidate 1", "tokens", f"{step}"))
        await asyncio.sleep(0.05)
    assert len(sent) == 1  # held back by the interval
    while len(sent) < 2 and loop.time() - first < 5:
        await asyncio.sleep(0.01)
    assert loop.time() - first >= 0.8
    assert [d.text for d in sent[1].deltas] == ["012"] and len(sent) == 2
