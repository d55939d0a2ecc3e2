"""Redis round trips on the per-request path, counted on a real Redis: each one is latency every
request pays, so the count is pinned. A round trip is one write of commands to a connection: a
single command or a whole pipeline."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.asyncio.connection import AbstractConnection
from starlette.requests import Request

from services.common.metrics import ServiceMetrics
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan
from services.gateway.routing import Route
from services.gateway.session import Session, Sessions, hung_up
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs import queue as jobs_queue
from services.jobs.celery_app import make_celery
from services.jobs.queue import JobQueue
from services.jobs.record import JobRecord
from services.jobs.trace_store import TraceStore, owner_key, trace_key


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts every send of packed commands on the asyncio client (one per round trip)."""
    sent: list[int] = []
    original = AbstractConnection.send_packed_command

    async def counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
        sent.append(1)
        await original(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", counted)
    return sent


def test_result_and_trace_share_one_round_trip_and_a_duplicate_adds_no_events(redis_url: str, trips: list[int]) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await client.ping()
            events, traces = ev.JobEvents(client, 60), TraceStore(client, 60)
            trace = orchestrator_pb2.SearchTrace(
                trace_id="t-rt", result=orchestrator_pb2.SearchResult(strategy="single")
            )
            result = orchestrator_pb2.SearchResult(job_id="j-rt", answer="4", trace_id="t-rt", started_at=12.5)
            delta = orchestrator_pb2.JobEvent(job_id="j-rt", answer_delta="4")
            trips.clear()
            recorded = await events.record_result(
                result, ev.SUCCEEDED, [delta], also=lambda pipe: traces.queue_save(pipe, trace, owner="alice")
            )
            assert recorded and len(trips) == 2  # SET NX with the trace, then record + events
            doc, owner = await traces.load_with_owner("t-rt")
            assert doc is not None and doc["result"]["strategy"] == "single" and owner == "alice"
            stored = await events.result("j-rt")
            assert stored is not None and stored.started_at == 12.5
            assert await client.xlen(ev.events_key("j-rt")) == 2
            # A redelivered run: its trace is saved (as before), its result and events are not.
            await client.delete(trace_key("t-rt"), owner_key("t-rt"))
            trips.clear()
            again = await events.record_result(
                result, ev.SUCCEEDED, [delta], also=lambda pipe: traces.queue_save(pipe, trace)
            )
            assert not again and len(trips) == 1
            assert await client.exists(trace_key("t-rt")) and not await client.exists(owner_key("t-rt"))
            assert await client.xlen(ev.events_key("j-rt")) == 2
        finally:
            await client.aclose()

    asyncio.run(body())


def test_enqueue_is_one_round_trip_and_refreshes_the_queue_depth(
    redis_url: str, trips: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        celery = make_celery(redis_url, queue="q-rt")
        dispatcher = JobQueue(client, celery, "q-rt", 60)
        try:
            await client.delete("q-rt")
            monkeypatch.setattr(jobs_queue, "DEPTH_FRESH_S", 60.0)  # the figure stays fresh through the loop
            trips.clear()
            assert await dispatcher.depth() == 0 and len(trips) == 1  # a fresh read: LLEN
            for n in range(3):
                job = orchestrator_pb2.SearchJob(job_id=f"rt-{n}", model="m", enqueued_at=time.time())
                trips.clear()
                await dispatcher.enqueue(job, JobRecord(model="m"))
                assert len(trips) == 1  # record + TTL + Celery message + queue length in one transaction
                trips.clear()
                # While fresh, the depth is the one read in that transaction, this job included.
                assert await dispatcher.depth() == n + 1 and trips == []
            assert await client.llen("q-rt") == 3
            # Another gateway's job shows once the figure is stale.
            monkeypatch.setattr(jobs_queue, "DEPTH_FRESH_S", 0.0)
            await client.lpush("q-rt", b"other")
            await asyncio.sleep(0.001)
            assert await dispatcher.depth() == 4
            record = await dispatcher.record("rt-2")
            assert record is not None and record.status == "queued" and record.enqueued_at
        finally:
            await client.delete("q-rt")
            await client.aclose()

    asyncio.run(body())


def test_the_reply_record_takes_the_start_from_the_result_else_reads_it_back(redis_url: str, trips: list[int]) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        metrics = GatewayMetrics(ServiceMetrics("gateway-round-trips"))
        sessions = Sessions(None, JobQueue(client, None, "q", 60), None, metrics, 10.0)  # type: ignore[arg-type]
        plan = Plan(
            orchestrator_pb2.SearchJob(job_id="fr", enqueued_at=10.0),
            Route(strategy="single", token_budget=10),
            "none",
            "none",
        )
        session = Session(sessions, plan, JobRecord(model="m"), None, 0.0, stream=False, background=False)
        try:
            stored: Any = JobRecord(model="m", enqueued_at=10.0, started_at=11.0).to_redis()
            await client.hset(ev.job_key("fr"), mapping=stored)
            trips.clear()
            carried = orchestrator_pb2.SearchResult(job_id="fr", started_at=12.5)
            record = await session._final_record(carried)
            assert trips == [] and record.queue_wait() == 2.5 and record.model == "m"
            old_worker = orchestrator_pb2.SearchResult(job_id="fr")
            record = await session._final_record(old_worker)
            assert len(trips) == 1 and record.queue_wait() == 1.0
        finally:
            await client.aclose()

    asyncio.run(body())


def test_a_hang_up_is_seen_from_receive_without_polling() -> None:
    async def body() -> None:
        messages: list[dict[str, Any]] = [
            {"type": "http.request", "body": b"", "more_body": False},
            {"type": "http.disconnect"},
        ]
        calls: list[str] = []

        async def receive() -> dict[str, Any]:
            calls.append("receive")
            return messages.pop(0)

        await asyncio.wait_for(hung_up(Request({"type": "http"}, receive)), 1.0)
        assert len(calls) == 2

        async def broken() -> dict[str, Any]:
            raise RuntimeError("no receive here")

        with pytest.raises(TimeoutError):  # a receive that fails never reports a hang-up
            await asyncio.wait_for(hung_up(Request({"type": "http"}, broken)), 0.05)

    asyncio.run(body())


def test_a_worker_starts_a_job_in_one_round_trip_and_marks_it_running_only_when_it_may_run(
    redis_url: str, trips: list[int]
) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        events = ev.JobEvents(client, 60)
        try:
            await client.ping()
            fields: Any = JobRecord(model="m").to_redis()
            for job in ("s-free", "s-result", "s-cancel"):
                await client.hset(ev.job_key(job), mapping=fields)
            await client.set(ev.result_key("s-result"), b"x")
            await client.set(ev.cancel_key("s-cancel"), b"1")
            trips.clear()
            assert await events.start("s-free", "w:1", 15, 12.5) == (False, False, True)
            assert len(trips) <= 3  # the first call on a server loads the script (EVALSHA, SCRIPT LOAD, EVALSHA)
            record = JobRecord.from_redis(await client.hgetall(ev.job_key("s-free")))
            assert (record.status, record.started_at, record.worker, record.model) == ("running", 12.5, "w:1", "m")
            assert 0 < await client.ttl(ev.lease_key("s-free")) <= 15
            # A second delivery while the lease is held: not leased, the record keeps the first start.
            assert await events.start("s-free", "w:2", 15, 99.0) == (False, False, False)
            record = JobRecord.from_redis(await client.hgetall(ev.job_key("s-free")))
            assert (record.started_at, record.worker) == (12.5, "w:1")
            # A job with a result, or a cancelled one, is leased (to be released) but never marked running.
            trips.clear()
            assert await events.start("s-result", "w:1", 15, 1.0) == (True, False, True)
            assert len(trips) == 1
            assert await events.start("s-cancel", "w:1", 15, 1.0) == (False, True, True)
            for job in ("s-result", "s-cancel"):
                assert JobRecord.from_redis(await client.hgetall(ev.job_key(job))).status == "queued"
        finally:
            await client.aclose()

    asyncio.run(body())
