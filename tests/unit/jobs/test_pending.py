"""A job whose message a dying worker took off the queue before kombu held it is sent again.

Seen in the chaos run: a worker SIGKILLed right after its BRPOP took a background job's message;
kombu registers a message as unacknowledged only in a second round trip, so the message was in
neither place and the job's record stayed ``queued`` for ever. Real Redis; the gateway's own
enqueue, the worker's own start script, the sweep the workers run.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator

import pytest
import redis.asyncio as aioredis

from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from services.jobs.pending import PENDING, PENDING_SINCE, UNACKED, PendingSweeper, Sweep, task_id
from services.jobs.queue import JobQueue
from services.jobs.record import JobRecord
from tests.helpers.search_jobs import make_job

GRACE_S = 5.0


@pytest.fixture
def queue_name() -> Iterator[str]:
    yield f"q-pending-{uuid.uuid4().hex[:8]}"


async def _enqueued(client: aioredis.Redis, queue: str) -> str:
    job = make_job("single", n=1)
    job.job_id = uuid.uuid4().hex
    await JobQueue(client, make_celery("redis://unused", queue), queue, 60).enqueue(job, JobRecord(model="m"))
    return job.job_id


def _run(scenario: Callable[[aioredis.Redis], Awaitable[None]], redis_url: str) -> None:
    """``scenario`` on a client of ``redis_url``, in a loop of its own."""

    async def main() -> None:
        client = aioredis.Redis.from_url(redis_url)
        try:
            await scenario(client)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_message_taken_off_the_list_and_lost_is_sent_again_once(redis_url: str, queue_name: str) -> None:
    async def scenario(client: aioredis.Redis) -> None:
        job_id = await _enqueued(client, queue_name)
        taken = await client.rpop(queue_name)  # the worker's BRPOP; it dies before registering it
        assert task_id(taken) == job_id
        sweeper = PendingSweeper(client, queue_name, GRACE_S, ev.result_key)
        now = time.time()
        assert (await sweeper.sweep(now)).resent == ()  # within the grace nothing is touched
        swept = await sweeper.sweep(now + GRACE_S + 1)
        assert swept.resent == (job_id,)
        (sent,) = await client.lrange(queue_name, 0, -1)
        assert task_id(sent) == job_id and sent != taken  # the same job under a fresh delivery tag
        assert (await sweeper.sweep(now + GRACE_S + 2)).resent == ()  # on the list now: not sent twice
        await ev.JobEvents(client, 60).start(job_id, "w:1", 15, time.time())  # a worker takes it
        assert await client.hget(PENDING, job_id) is None and await client.zscore(PENDING_SINCE, job_id) is None
        await client.delete(queue_name)
        assert (await sweeper.sweep(now + 3 * GRACE_S)).resent == ()  # started: kombu's restore owns it

    _run(scenario, redis_url)


def test_queued_and_unacknowledged_messages_are_left_alone(redis_url: str, queue_name: str) -> None:
    async def scenario(client: aioredis.Redis) -> None:
        waiting = await _enqueued(client, queue_name)  # still on the list (a long backlog)
        held = await _enqueued(client, queue_name)
        message = await client.rpop(queue_name)  # a worker holds it, registered as kombu does
        assert isinstance(message, bytes) and task_id(message) == waiting  # the oldest is popped first
        tag = str(uuid.uuid4())
        await client.hset(UNACKED, tag, json.dumps([json.loads(message), "", queue_name]))
        sweeper = PendingSweeper(client, queue_name, GRACE_S, ev.result_key)
        assert (await sweeper.sweep(time.time() + GRACE_S + 1)).resent == ()
        assert await client.llen(queue_name) == 1 and held
        await client.hdel(UNACKED, tag)

    _run(scenario, redis_url)


def test_a_lost_job_cancelled_while_queued_is_not_sent_again(redis_url: str, queue_name: str) -> None:
    async def scenario(client: aioredis.Redis) -> None:
        job_id = await _enqueued(client, queue_name)
        await client.rpop(queue_name)
        jobs = JobQueue(client, None, queue_name, 60)
        assert await jobs.cancel(job_id, "client")
        swept = await PendingSweeper(client, queue_name, GRACE_S, ev.result_key).sweep(time.time() + GRACE_S + 1)
        assert swept == Sweep(resent=(), dropped=(job_id,))
        assert await client.hget(PENDING, job_id) is None and await client.llen(queue_name) == 0

    _run(scenario, redis_url)


def test_another_queues_lost_jobs_are_that_queues_workers_business(redis_url: str, queue_name: str) -> None:
    async def scenario(client: aioredis.Redis) -> None:
        job_id = await _enqueued(client, queue_name)
        await client.rpop(queue_name)
        other = PendingSweeper(client, f"{queue_name}-other", GRACE_S, ev.result_key)
        assert (await other.sweep(time.time() + GRACE_S + 1)).resent == ()
        assert await client.hget(PENDING, job_id) is not None
        await client.hdel(PENDING, job_id)
        await client.zrem(PENDING_SINCE, job_id)

    _run(scenario, redis_url)
