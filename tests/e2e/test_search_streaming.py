"""A search streams what it is doing, through the real queue (the worker's side):
a real Redis, a real Celery worker and the policy service on SmolLM2 (llama.cpp).

A self-consistency job of three candidates goes in exactly as the gateway enqueues it; its
event stream must hold reasoning events whose ``tokens`` deltas are the candidates' own text
(as decoded: the candidates' trace nodes hold the same text), labelled ``candidate 1..3``,
then the vote's tally, all before the result, and in far fewer events than tokens (the
worker's batching). A quiet copy of the job publishes no reasoning at all. Run under
``flock /tmp/ttc-model.lock``; about 20 s.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import grpc
import pytest
import redis.asyncio as aioredis

from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, orchestrator_pb2_grpc
from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server)
    try:
        s.start_policy()
        s.start_worker(concurrency=2)
        yield s
    finally:
        s.stop()


def job(*, quiet: bool) -> orchestrator_pb2.SearchJob:
    return orchestrator_pb2.SearchJob(
        job_id=uuid.uuid4().hex,
        model=MODEL,
        messages=[common_pb2.ChatMessage(role="user", content="Name a color of the sky, in one sentence.")],
        # logprobs off: the vote's tie-break is not under test here
        strategy=orchestrator_pb2.StrategySpec(name="self_consistency", n=3, params={"logprobs": False}),
        budget=orchestrator_pb2.Budget(max_generated_tokens=400, deadline_seconds=120),
        temperature=0.7,
        max_tokens=32,
        seed=11,
        stream_answer=True,
        quiet=quiet,
    )


def events_of(stack: GatewayStack, j: orchestrator_pb2.SearchJob) -> list[orchestrator_pb2.JobEvent]:
    celery = make_celery(stack.redis.url, stack.queue, 8, 1)
    celery.send_task(ev.SEARCH_TASK, args=[ev.encode_job(j)], task_id=j.job_id, queue=stack.queue)

    async def follow() -> list[orchestrator_pb2.JobEvent]:
        client = aioredis.Redis.from_url(stack.redis.url)
        try:
            events = ev.JobEvents(client, 600)
            return [e async for _, e in events.follow(j.job_id, until=time.monotonic() + 120)]
        finally:
            await client.aclose()

    return asyncio.run(follow())


def test_a_search_streams_its_candidates_tokens_and_its_tally_before_the_result(stack: GatewayStack) -> None:
    j = job(quiet=False)
    events = events_of(stack, j)
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "result", kinds
    result = events[-1].result
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED, result.error
    assert "reasoning" in kinds and kinds.index("reasoning") < kinds.index("answer_delta") < kinds.index("result")
    assert "reasoning" not in kinds[kinds.index("answer_delta") :]
    deltas = [d for e in events if e.WhichOneof("event") == "reasoning" for d in e.reasoning.deltas]
    texts: dict[str, str] = {}
    for d in deltas:
        if d.kind == "tokens":
            texts[d.source] = texts.get(d.source, "") + d.text
    assert set(texts) == {"candidate 1", "candidate 2", "candidate 3"}, set(texts)
    with grpc.insecure_channel(f"127.0.0.1:{stack.worker_grpc_ports[0]}") as channel:
        trace = orchestrator_pb2_grpc.OrchestratorStub(channel).GetTrace(
            orchestrator_pb2.GetTraceRequest(trace_id=result.trace_id), timeout=30
        )
    drawn = sorted(n.text for n in trace.nodes if n.action == "generate")
    assert sorted(texts.values()) == drawn  # the model's own tokens, every one
    assert any(d.source == "vote" and d.kind == "event" and d.text.startswith("tally of 3") for d in deltas)
    tokens = result.budget_used.generated_tokens
    print(f"{tokens} tokens in {kinds.count('reasoning')} reasoning events ({len(deltas)} deltas)")
    assert kinds.count("reasoning") < tokens / 2  # batched: not one event per token


def test_a_quiet_job_publishes_no_reasoning(stack: GatewayStack) -> None:
    events = events_of(stack, job(quiet=True))
    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "result" and "reasoning" not in kinds, kinds
