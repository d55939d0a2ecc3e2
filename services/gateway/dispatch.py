"""Queue-backed dispatch: enqueue a job for orchestrator workers and read its events back.

The job's record (everything needed to format its reply) and the job's Celery message go
into Redis in one transaction (``services/jobs/celery_message.py``), so a gateway that restarts
- or a different replica - can still answer a poll for a background job, and the queue length
read in that transaction counts this job exactly once. Nothing is written unless the request
already passed validation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator

import redis.asyncio as aioredis
from celery import Celery
from opentelemetry import trace

from services.common.tracing import inject_context
from services.gateway.errors import HTTPError
from services.gateway.tracing import annotate_plan, tracer
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.celery_message import search_message
from services.jobs.record import JobRecord, MalformedJobRecord

log = logging.getLogger(__name__)

# How long a read of the broker queue's length stands in for a fresh one. Under load it is
# refreshed by every enqueue's own pipeline (no extra round trip); jobs this gateway sent since
# are counted on top, so a burst cannot hide behind a stale figure.
DEPTH_FRESH_S = 0.2


class Dispatcher:
    def __init__(self, client: aioredis.Redis, celery: Celery, queue: str, ttl_s: int) -> None:
        self.client = client
        self.celery = celery
        self.queue = queue
        self.ttl_s = ttl_s
        self.events = ev.JobEvents(client, ttl_s)
        self._depth = 0  # the queue's length at the last read ...
        self._depth_at = -1.0  # ... (time.monotonic())

    async def queue_depth(self) -> int:
        """Jobs waiting for a worker (the broker's list for the queue), read at most every
        ``DEPTH_FRESH_S``: every enqueue of this gateway reads it afresh, its own job included."""
        if time.monotonic() - self._depth_at > DEPTH_FRESH_S:
            self._saw_depth(int(await self.client.llen(self.queue)))
        return self._depth

    def _saw_depth(self, depth: int) -> None:
        self._depth, self._depth_at = depth, time.monotonic()

    async def enqueue(self, job: orchestrator_pb2.SearchJob, record: JobRecord) -> None:
        """Store the job's record (status ``queued``) and send the job to the workers, in one transaction.

        The job carries its owner (the record's caller: the trace store records it) and the
        trace context of the ``gateway/enqueue`` span, so the worker's search joins this trace."""
        annotate_plan(
            job.model, record.effort_applied, record.effort_requested, record.strategy, job.job_id, job.max_tokens
        )
        with tracer.start_as_current_span("gateway/enqueue", kind=trace.SpanKind.PRODUCER) as span:
            span.set_attribute("messaging.destination.name", self.queue)
            span.set_attribute("ttc.job_id", job.job_id)
            job.owner = record.caller or ""
            job.trace_context.clear()
            job.trace_context.update(inject_context())
            queued = record.model_copy(update={"status": ev.QUEUED, "enqueued_at": job.enqueued_at or time.time()})
            fields = queued.to_redis()
            message = search_message(self.celery, job.job_id, ev.encode_job(job), self.queue)
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hset(ev.job_key(job.job_id), mapping=fields)  # type: ignore[arg-type]
                pipe.expire(ev.job_key(job.job_id), self.ttl_s)
                pipe.lpush(self.queue, message)  # kombu's Redis transport: LPUSH, workers BRPOP
                pipe.llen(self.queue)  # the queue depth for the next requests, this job included
                *_, depth = await pipe.execute()
            self._saw_depth(int(depth))

    async def record(self, job_id: str) -> JobRecord | None:
        """The job's stored record (status included), or ``None`` for an unknown or expired job.

        A record that does not validate is a 500 naming its fields, never a half-read dict."""
        raw = await self.client.hgetall(ev.job_key(job_id))
        if not raw:
            return None
        try:
            return JobRecord.from_redis(raw, ev.job_key(job_id))
        except MalformedJobRecord as exc:
            log.error("%s", exc)
            raise HTTPError(500, str(exc), type="server_error", code="job_record_invalid") from exc

    def follow(self, job_id: str, until: float | None = None) -> AsyncIterator[tuple[str, orchestrator_pb2.JobEvent]]:
        return self.events.follow(job_id, until=until)

    async def result(self, job_id: str) -> orchestrator_pb2.SearchResult | None:
        return await self.events.result(job_id)

    async def cancel(self, job_id: str) -> None:
        await self.events.cancel(job_id)
        # A job no worker has started yet is final now; a running one is marked by its worker.
        value = JobRecord(cancel_requested_at=time.time()).to_redis(only={"cancel_requested_at"})
        await self.client.hsetnx(ev.job_key(job_id), "cancel_requested_at", value["cancel_requested_at"])
