"""A cancellation the gateway recorded first, read with what the worker had spent
(``services/jobs/events.py``: ``record_spent``, ``with_spend``, ``JobEvents.result``)."""

from __future__ import annotations

import redis.asyncio as aioredis

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from tests.conftest import RedisServer

CANCELLED = orchestrator_pb2.TERMINATION_CANCELLED


def _worker_spend(job_id: str) -> orchestrator_pb2.SearchResult:
    return orchestrator_pb2.SearchResult(
        job_id=job_id,
        strategy="single",
        termination=CANCELLED,
        started_at=12.5,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=37, prompt_tokens=9, policy_calls=1),
    )


def test_only_a_gateway_recorded_cancellation_takes_the_workers_spend() -> None:
    spent = _worker_spend("j")
    gateway = orchestrator_pb2.SearchResult(job_id="j", termination=CANCELLED, error='{"code":"CANCELLED"}')
    merged = ev.with_spend(gateway, spent)
    assert merged.budget_used.generated_tokens == 37 and merged.started_at == 12.5 and merged.strategy == "single"
    assert merged.error == gateway.error and not gateway.HasField("budget_used")  # a copy; the original stands
    assert ev.with_spend(gateway, None) is gateway
    finished = orchestrator_pb2.SearchResult(job_id="j", termination=orchestrator_pb2.TERMINATION_COMPLETED)
    assert ev.with_spend(finished, spent) is finished  # a result of its own keeps its own usage
    by_worker = _worker_spend("j")
    by_worker.budget_used.generated_tokens = 40
    assert ev.with_spend(by_worker, spent).budget_used.generated_tokens == 40  # the worker recorded it: as is


async def test_the_result_a_reader_gets_carries_the_spend_kept_beside_it(redis_server: RedisServer) -> None:
    client = aioredis.Redis.from_url(redis_server.url)
    try:
        events = ev.JobEvents(client, ttl_s=60)
        assert await events.result("sp") is None
        gateway = orchestrator_pb2.SearchResult(job_id="sp", termination=CANCELLED)
        assert await events.record_result(gateway, ev.CANCELLED)
        read = await events.result("sp")
        assert read is not None and read.budget_used.generated_tokens == 0
        await events.record_spent(_worker_spend("sp"))
        read = await events.result("sp")
        assert read is not None and read.budget_used.generated_tokens == 37 and read.started_at == 12.5
        assert 0 < await client.ttl(ev.spent_key("sp")) <= 60
    finally:
        await client.aclose()
