"""A cancelled job's result shows what its worker had spent before the cancel.

A real ``JobRunner`` (its own event loop and Redis client, as in a worker process) runs a quiet
job against an in-process policy whose streams send ``SENT`` counted chunks and then stall; the
job is cancelled while they stall. Either side may record the cancellation first:

- the gateway (``JobQueue.cancel``, an API cancel): the worker's spend is kept beside it and the
  result a reader gets carries it (``JobEvents.result``);
- the worker (only the cancel key is seen): its own result carries the spend.

Real Redis and real gRPC on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest
import redis.asyncio as aioredis

from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.queue import JobQueue
from services.orchestrator.metrics import OrchestratorMetrics
from services.orchestrator.settings import OrchestratorSettings
from services.orchestrator.worker import JobRunner
from tests.conftest import RedisServer
from tests.helpers.processes import free_port
from tests.helpers.search_jobs import make_job
from tests.unit.orchestrator.test_partial_usage import PROMPT, SENT, StallingPolicy, served

__all__ = ["served"]  # the in-process policy fixture


@pytest.fixture
def runner(served: tuple[StallingPolicy, str], redis_server: RedisServer) -> Iterator[JobRunner]:
    unused = f"127.0.0.1:{free_port()}"  # a best-of-n search is cancelled before it verifies
    settings = OrchestratorSettings(
        policy_target=served[1],
        verifier_target=unused,
        sandbox_target=unused,
        policy_affinity=False,
        port=0,
        cancel_poll_s=0.2,
    )
    job_runner = JobRunner(settings, redis_server.url, OrchestratorMetrics(ServiceMetrics("orchestrator")))
    yield job_runner
    job_runner.submit(job_runner.close())
    job_runner.loop.call_soon_threadsafe(job_runner.loop.stop)


async def _cancelled_while_decoding(
    runner: JobRunner, fake: StallingPolicy, cancel: object
) -> tuple[str, orchestrator_pb2.SearchResult | None, int]:
    job = make_job("best_of_n", n=2)  # its calls ask no logprobs: the worker streams them
    job.job_id = uuid.uuid4().hex
    job.quiet = True  # no text goes anywhere: the stream is there for the count alone
    outcome = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(runner.run(ev.encode_job(job)), runner.loop))
    deadline = time.monotonic() + 10
    while not fake.requests and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # the chunks are on their way; the stream then stalls
    calls = len(fake.requests)
    client = aioredis.Redis.from_url(runner.redis_url)
    try:
        assert callable(cancel)
        await cancel(client, job.job_id)
        done = await asyncio.wait_for(outcome, 10)
        return done, await ev.JobEvents(client, 60).result(job.job_id), calls
    finally:
        await client.aclose()


async def test_a_job_the_gateway_cancelled_shows_what_the_worker_had_decoded(
    runner: JobRunner, served: tuple[StallingPolicy, str]
) -> None:
    async def gateway_cancel(client: aioredis.Redis, job_id: str) -> None:
        assert await JobQueue(client, None, "unused", 60).cancel(job_id, "api")  # recorded first

    done, result, calls = await _cancelled_while_decoding(runner, served[0], gateway_cancel)
    assert done == "cancelled" and result is not None and calls >= 1
    assert result.termination == orchestrator_pb2.TERMINATION_CANCELLED
    assert "cancelled (api)" in result.error  # the gateway's own record stays the result
    assert result.budget_used.generated_tokens == SENT * calls
    assert result.budget_used.prompt_tokens == PROMPT * calls  # each cut stream's first chunk said so
    assert result.budget_used.policy_calls == calls
    assert result.started_at > 0 and result.budget_used.wall_seconds > 0.3


async def test_a_job_its_worker_saw_cancelled_first_records_its_spend(
    runner: JobRunner, served: tuple[StallingPolicy, str]
) -> None:
    async def cancel_key_only(client: aioredis.Redis, job_id: str) -> None:
        await ev.JobEvents(client, 60).cancel(job_id)

    done, result, calls = await _cancelled_while_decoding(runner, served[0], cancel_key_only)
    assert done == "cancelled" and result is not None
    assert result.termination == orchestrator_pb2.TERMINATION_CANCELLED
    assert result.budget_used.generated_tokens == SENT * calls and result.started_at > 0
