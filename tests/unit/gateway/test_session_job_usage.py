"""``GET /v1/jobs/{id}`` shows what a cancelled job had spent before the cancel: the real app
on a real Redis (no model: the worker's side is written as a worker writes it).

An API cancel records the gateway's cancellation first; the worker then keeps its spend beside
it (``JobEvents.record_spent``), and the poll reports it as ``usage``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis
from fastapi.testclient import TestClient

from services.common.settings import CommonSettings
from services.gateway.app import build_app
from services.gateway.settings import GatewaySettings
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.record import JobRecord
from services.jobs.settings import JobsSettings
from tests.helpers.processes import RedisServer, free_port

KEY = "sk-alice-usage"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[TestClient]:
    settings = GatewaySettings(policy_target=f"127.0.0.1:{free_port()}", api_keys=f"alice:{KEY}")
    app = build_app(
        settings, CommonSettings(redis_url=redis_server.url), jobs_settings=JobsSettings(queue="ttc.search.usage")
    )
    with TestClient(app) as c:
        yield c


def _running_job(redis_server: RedisServer) -> str:
    job_id = os.urandom(8).hex()
    record = JobRecord(kind="text_completion", model="m", created_at=1.0, caller="alice", status="running")

    async def store() -> None:
        r = aioredis.Redis.from_url(redis_server.url)
        await r.hset(ev.job_key(job_id), mapping=record.to_redis())  # type: ignore[arg-type]
        await r.aclose()

    asyncio.run(store())
    return job_id


def _worker_keeps_its_spend(redis_server: RedisServer, job_id: str, generated: int) -> None:
    """What the worker does once its search stopped (``JobRunner._record_cancelled``)."""
    spent = orchestrator_pb2.SearchResult(
        job_id=job_id,
        termination=orchestrator_pb2.TERMINATION_CANCELLED,
        started_at=2.0,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=generated, prompt_tokens=11, policy_calls=1),
    )

    async def write() -> None:
        r = aioredis.Redis.from_url(redis_server.url)
        events = ev.JobEvents(r, 60)
        assert not await events.record_result(spent, ev.CANCELLED)  # the gateway's cancellation stands
        await events.record_spent(spent)
        await r.aclose()

    asyncio.run(write())


def test_a_cancelled_job_shows_the_tokens_its_worker_decoded(client: TestClient, redis_server: RedisServer) -> None:
    job_id = _running_job(redis_server)
    running = client.get(f"/v1/jobs/{job_id}", headers=AUTH).json()
    assert running["status"] == "running" and "usage" not in running

    cancelled = client.post(f"/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert "usage" not in cancelled.json()  # the worker has not said what it spent yet

    _worker_keeps_its_spend(redis_server, job_id, generated=37)
    job = client.get(f"/v1/jobs/{job_id}", headers=AUTH).json()
    assert job["status"] == "cancelled" and job["error"]["code"] == "job_cancelled"
    assert job["usage"]["completion_tokens"] == 37 and job["usage"]["prompt_tokens"] == 11
    assert job["usage"]["total_tokens"] == 48


def test_the_job_schema_documents_usage(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    responses = schema["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]
    ref = responses["200"]["content"]["application/json"]["schema"]["$ref"]
    usage = schema["components"]["schemas"][ref.rsplit("/", 1)[-1]]["properties"]["usage"]
    assert "cancelled" in str(usage)
