"""The gateway's face of the job contract: enqueue a job, read its record and result, follow its
events, cancel it.

Raw Redis and nothing else: no HTTP and no tracing here (the gateway's session wraps these calls
in its spans and maps what they raise). A stored record that does not validate raises
``MalformedJobRecord`` naming its fields, never a half-read dict.

The job's record (everything needed to format its reply) and the job's Celery message go into
Redis in one transaction (``celery_message.py``), so a gateway that restarts - or a different
replica - can still answer a poll for a background job, and the queue length read in that
transaction counts this job exactly once. The same transaction keeps the job pending until a
worker starts it (``pending.py``: a message a dying worker took off the list is sent again).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Mapping

import redis.asyncio as aioredis
from celery import Celery

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs import pending
from services.jobs.celery_message import search_message
from services.jobs.errors import JobError
from services.jobs.record import JobRecord

# How long a read of the broker queue's length stands in for a fresh one. Under load it is
# refreshed by every enqueue's own pipeline (no extra round trip); jobs this gateway sent since
# are counted on top, so a burst cannot hide behind a stale figure.
DEPTH_FRESH_S = 0.2


class JobQueue:
    """One queue's jobs as the gateway sees them."""

    def __init__(self, client: aioredis.Redis, celery: Celery | None, queue: str, ttl_s: int) -> None:
        self.client = client
        self.celery = celery  # only to build messages; None for a reader that never enqueues
        self.queue = queue
        self.ttl_s = ttl_s
        self.events = ev.JobEvents(client, ttl_s)
        self._depth = 0  # the queue's length at the last read ...
        self._depth_at = -1.0  # ... (time.monotonic())

    async def depth(self) -> int:
        """Jobs waiting for a worker (the broker's list for the queue), read at most every
        ``DEPTH_FRESH_S``: every enqueue of this gateway reads it afresh, its own job included."""
        if time.monotonic() - self._depth_at > DEPTH_FRESH_S:
            self._saw_depth(int(await self.client.llen(self.queue)))
        return self._depth

    def _saw_depth(self, depth: int) -> None:
        self._depth, self._depth_at = depth, time.monotonic()

    async def enqueue(
        self, job: orchestrator_pb2.SearchJob, record: JobRecord, trace_context: Mapping[str, str] | None = None
    ) -> None:
        """Store the job's record (status ``queued``) and send the job to the workers, in one transaction.

        ``trace_context`` goes into the message's copy of the job (the caller's span, which the
        worker's search joins); ``job`` itself is left as planned."""
        if self.celery is None:
            raise RuntimeError("this JobQueue was built without a Celery app and cannot enqueue")
        sent = job
        if trace_context is not None:
            sent = orchestrator_pb2.SearchJob()
            sent.CopyFrom(job)
            sent.trace_context.clear()
            sent.trace_context.update(trace_context)
        queued = record.model_copy(update={"status": ev.QUEUED, "enqueued_at": job.enqueued_at or time.time()})
        message = search_message(self.celery, job.job_id, ev.encode_job(sent), self.queue)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(ev.job_key(job.job_id), mapping=queued.to_redis())  # type: ignore[arg-type]
            pipe.expire(ev.job_key(job.job_id), self.ttl_s)
            pipe.lpush(self.queue, message)  # kombu's Redis transport: LPUSH, workers BRPOP
            pending.add(pipe, self.queue, job.job_id, message, queued.enqueued_at or time.time())
            pipe.llen(self.queue)  # the queue depth for the next requests, this job included
            *_, depth = await pipe.execute()
        self._saw_depth(int(depth))

    async def record(self, job_id: str) -> JobRecord | None:
        """The job's stored record (status included), or ``None`` for an unknown or expired job;
        ``MalformedJobRecord`` when it does not validate."""
        raw = await self.client.hgetall(ev.job_key(job_id))
        return JobRecord.from_redis(raw, ev.job_key(job_id)) if raw else None

    async def result(self, job_id: str) -> orchestrator_pb2.SearchResult | None:
        return await self.events.result(job_id)

    def follow(
        self, job_id: str, last_id: str = "0-0", until: float | None = None
    ) -> AsyncIterator[tuple[str, orchestrator_pb2.JobEvent]]:
        """The job's events from ``last_id`` on (``JobEvents.follow``), ending at the result or ``until``."""
        return self.events.follow(job_id, last_id=last_id, until=until)

    async def cancel(self, job_id: str, cause: str) -> bool:
        """Record the cancellation as the job's one result (unless it has one), then stop the worker.

        True when this call recorded it (the job had no result yet). A job no worker has started
        is final at once; a running one is marked by its worker when its search stops."""
        result = orchestrator_pb2.SearchResult(
            job_id=job_id,
            termination=orchestrator_pb2.TERMINATION_CANCELLED,
            error=JobError("CANCELLED", f"cancelled ({cause})").to_json(),
        )
        recorded = await self.events.record_result(result, ev.CANCELLED)
        await self.events.cancel(job_id)
        value = JobRecord(cancel_requested_at=time.time()).to_redis(only={"cancel_requested_at"})
        await self.client.hsetnx(ev.job_key(job_id), "cancel_requested_at", value["cancel_requested_at"])
        return recorded
