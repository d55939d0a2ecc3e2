"""A worker's runner sends again, on its own, a job whose message a dying worker lost.

The sweep itself is tested in tests/unit/jobs/test_pending.py; this is its wiring: a real
``JobRunner`` (its own loop and Redis client, as in a worker process) on a real Redis, with the
shortest visibility timeout the settings allow. The gateway's enqueue puts the job on the list; a
worker's BRPOP takes it and the worker dies before kombu registers it (an RPOP here); the runner's
sweep puts it back on the list, where a live worker's BRPOP finds it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from services.common.metrics import ServiceMetrics
from services.jobs.celery_app import make_celery
from services.jobs.pending import task_id
from services.jobs.queue import JobQueue
from services.jobs.record import JobRecord
from services.orchestrator.metrics import OrchestratorMetrics
from services.orchestrator.settings import OrchestratorSettings
from services.orchestrator.worker import JobRunner
from tests.helpers.search_jobs import make_job

DEADLINE_S = 60.0  # generous: the sweep runs every second once the 5 s grace has passed


@pytest.fixture
def queue_name() -> str:
    return f"q-lost-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def runner(redis_url: str, queue_name: str) -> Iterator[JobRunner]:
    unused = "127.0.0.1:1"  # no job runs here: the channels are never used
    settings = OrchestratorSettings(
        policy_target=unused,
        verifier_target=unused,
        sandbox_target=unused,
        policy_affinity=False,
        port=0,
        visibility_timeout_s=5,
        restore_interval_s=1,
    )
    metrics = OrchestratorMetrics(ServiceMetrics("orchestrator"))
    job_runner = JobRunner(settings, redis_url, metrics, queue=queue_name)
    yield job_runner
    job_runner.submit(job_runner.close())
    job_runner.loop.call_soon_threadsafe(job_runner.loop.stop)


def test_the_runner_sends_a_lost_job_again(runner: JobRunner, redis_url: str, queue_name: str) -> None:
    async def scenario() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            job = make_job("single", n=1)
            job.job_id = uuid.uuid4().hex
            jobs = JobQueue(client, make_celery(redis_url, queue_name), queue_name, 60)
            await jobs.enqueue(job, JobRecord(model="m"))
            assert task_id(await client.rpop(queue_name) or b"") == job.job_id  # taken, then lost
            deadline = time.monotonic() + DEADLINE_S
            back = None
            while back is None and time.monotonic() < deadline:
                back = await client.brpop([queue_name], timeout=1)  # a live worker's BRPOP
            assert back is not None, "the lost job was never sent again"
            assert task_id(back[1]) == job.job_id
            record = await jobs.record(job.job_id)
            assert record is not None and record.status == "queued"
        finally:
            await client.aclose()

    asyncio.run(scenario())
    # The sweep counts what it sent once its pipeline returned: read it until it shows.
    deadline = time.monotonic() + DEADLINE_S
    while _resent(runner) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _resent(runner) == 1


def _resent(runner: JobRunner) -> float | None:
    return runner.metrics.base.registry.get_sample_value("ttc_orchestrator_redeliveries_total", {"action": "resent"})
