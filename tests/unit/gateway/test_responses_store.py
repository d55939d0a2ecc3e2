"""The Responses store on a real Redis: TTL, ownership (another key gets 404), tombstones,
and retrieval from the one job store while a background response runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.common.metrics import ServiceMetrics
from services.gateway.errors import HTTPError
from services.gateway.metrics import GatewayMetrics
from services.gateway.responses import render
from services.gateway.responses.service import ResponsesService
from services.gateway.responses.store import ResponseStore, StoredResponse, response_key
from services.gateway.session import Sessions
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.queue import JobQueue
from services.jobs.record import JobRecord

JOB = "feedfacefeedfacefeedfacefeedface"


def run(coro: Any) -> Any:
    return asyncio.run(coro)


_METRICS = GatewayMetrics(ServiceMetrics("gateway-responses-store"))


def service(client: aioredis.Redis, ttl_s: int = 600) -> tuple[ResponsesService, ResponseStore, JobQueue]:
    jobs = JobQueue(client, None, "q", 600)  # nothing is enqueued here
    store = ResponseStore(client, ttl_s)
    sessions = Sessions(None, jobs, None, _METRICS, 10.0)  # type: ignore[arg-type]  # no planning here
    return ResponsesService(sessions, store), store, jobs


def test_store_ttl_is_set_once_and_entries_round_trip(redis_url: str) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        store = ResponseStore(client, 600)
        await store.put(
            JOB, StoredResponse(caller="alice", input=[{"type": "message", "role": "user", "content": "hi"}])
        )
        ttl = await client.ttl(response_key(JOB))
        assert 590 <= ttl <= 600
        await client.expire(response_key(JOB), 100)
        await store.put(JOB, StoredResponse(caller="alice", response={"id": f"resp_{JOB}"}))
        assert 0 < await client.ttl(response_key(JOB)) <= 100  # an update keeps the creation's TTL
        entry = await store.get(JOB)
        assert entry is not None and entry.response == {"id": f"resp_{JOB}"}
        assert entry.visible_to("alice") and entry.visible_to(None) and not entry.visible_to("bob")
        await store.delete(JOB, "alice")
        entry = await store.get(JOB)
        assert entry is not None and entry.deleted and entry.response is None and entry.input == []
        await client.delete(response_key(JOB))
        assert await store.get(JOB) is None
        await client.aclose()

    run(body())


def test_retrieve_is_owner_only_and_follows_the_job_record(redis_url: str) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        await client.flushdb()
        svc, store, jobs = service(client)
        record = JobRecord(
            kind="response", model="m", created_at=1.0, caller="alice", status="running", response={"store": True}
        )
        await client.hset(ev.job_key(JOB), mapping=record.to_redis())  # type: ignore[arg-type]
        await store.put(
            JOB, StoredResponse(caller="alice", input=[{"type": "message", "role": "user", "content": "hi"}])
        )
        rid = render.response_id(JOB)
        assert (await svc.retrieve(rid, "alice")).status == "in_progress"
        assert (await svc.retrieve(rid, None)).status == "in_progress"  # an admin key sees every response
        for who, ident in (("bob", rid), ("alice", "resp_0000"), ("alice", "chatcmpl-x")):
            with pytest.raises(HTTPError) as err:
                await svc.retrieve(ident, who)
            assert err.value.status == 404
        # A follow-up may not continue an unfinished response.
        with pytest.raises(Exception, match="has not finished"):
            await svc._history(rid, "alice")

        result = orchestrator_pb2.SearchResult(
            job_id=JOB, answer="hello", termination=orchestrator_pb2.TERMINATION_COMPLETED
        )
        await jobs.events.record_result(result, ev.SUCCEEDED)
        obj = await svc.retrieve(rid, "alice")
        assert obj.status == "completed" and obj.output_text == "hello"
        entry = await store.get(JOB)
        assert entry is not None and entry.response is not None  # kept with the conversation
        history = await svc._history(rid, "alice")
        assert [type(i).__name__ for i in history] == ["MessageItem", "MessageItem"]
        assert history[1].role == "assistant" and history[1].text() == "hello"  # type: ignore[union-attr]
        with pytest.raises(Exception, match="not found"):
            await svc._history(rid, "bob")

        deleted = await svc.delete(rid, "alice")
        assert deleted.deleted and deleted.id == rid
        with pytest.raises(HTTPError) as err:
            await svc.retrieve(rid, "alice")
        assert err.value.status == 404
        await client.aclose()

    run(body())


def test_store_false_lives_only_in_the_job_record(redis_url: str) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        await client.flushdb()
        svc, store, _ = service(client)
        record = JobRecord(
            kind="response",
            model="m",
            created_at=1.0,
            caller="alice",
            status="queued",
            background=True,
            response={"store": False},
        )
        await client.hset(ev.job_key(JOB), mapping=record.to_redis())  # type: ignore[arg-type]
        rid = render.response_id(JOB)
        assert (await svc.retrieve(rid, "alice")).status == "queued"
        assert await store.get(JOB) is None
        with pytest.raises(Exception, match=r"not stored|not found"):
            await svc._history(rid, "alice")
        # Not in the background, store: false is not retrievable at all.
        foreground = record.model_copy(update={"background": False})
        await client.hset(ev.job_key("cd" * 16), mapping=foreground.to_redis())  # type: ignore[arg-type]
        with pytest.raises(HTTPError):
            await svc.retrieve(render.response_id("cd" * 16), "alice")
        # A chat job is not a response, whoever asks.
        chat = JobRecord(kind="chat.completion", model="m", caller="alice")
        await client.hset(ev.job_key("ab" * 16), mapping=chat.to_redis())  # type: ignore[arg-type]
        with pytest.raises(HTTPError):
            await svc.retrieve(render.response_id("ab" * 16), "alice")
        await client.aclose()

    run(body())
