"""The Redis contract between the gateway and orchestrator workers for one job.

A job is a Celery message (the ``SearchJob`` protobuf, base64) plus a handful of Redis keys
that both sides read and write. Keeping the key names and encodings in one module is what
lets the gateway restart, or a worker die, without either side losing track of a job:

- ``ttc:job:<id>``          hash: status and the gateway's record (how to format the reply)
- ``ttc:job:<id>:events``   stream of ``JobEvent`` protobufs (progress, answer deltas, result)
- ``ttc:job:<id>:result``   the one recorded ``SearchResult`` (written with SET NX)
- ``ttc:job:<id>:cancel``   present when the job was cancelled (also published on CANCEL_CHANNEL)
- ``ttc:job:<id>:lease``    held (with a TTL, refreshed) by the worker running the job
- ``ttc:job:<id>:spent``    what the worker had spent on a job whose cancellation the gateway
                            recorded first (a ``SearchResult``: ``budget_used``, ``started_at``)

and, until a worker starts it, the job's entry in the pending keys (``pending.py``).
"""

from __future__ import annotations

import base64
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.errors import JobError
from services.jobs.pending import PENDING, PENDING_SINCE
from services.jobs.record import JobStatus, status_fields

CANCEL_CHANNEL = "ttc:cancel"
SEARCH_TASK = "ttc.search"
_EVENT_FIELD = b"e"

# Job statuses stored in the job hash (``record.JobStatus``).
QUEUED: JobStatus = "queued"
RUNNING: JobStatus = "running"
SUCCEEDED: JobStatus = "succeeded"
FAILED: JobStatus = "failed"
CANCELLED: JobStatus = "cancelled"


def job_key(job_id: str) -> str:
    return f"ttc:job:{job_id}"


def events_key(job_id: str) -> str:
    return f"ttc:job:{job_id}:events"


def result_key(job_id: str) -> str:
    return f"ttc:job:{job_id}:result"


def cancel_key(job_id: str) -> str:
    return f"ttc:job:{job_id}:cancel"


def lease_key(job_id: str) -> str:
    return f"ttc:job:{job_id}:lease"


def spent_key(job_id: str) -> str:
    return f"ttc:job:{job_id}:spent"


def _raw(value: object) -> bytes | None:
    return value.encode() if isinstance(value, str) else value if isinstance(value, bytes) else None


def with_spend(
    result: orchestrator_pb2.SearchResult, spent: orchestrator_pb2.SearchResult | None
) -> orchestrator_pb2.SearchResult:
    """The recorded result, with the worker's spend where the gateway recorded a cancellation
    before the worker stopped (the gateway's result knows nothing of what was decoded)."""
    if spent is None or result.termination != orchestrator_pb2.TERMINATION_CANCELLED or result.started_at:
        return result
    merged = orchestrator_pb2.SearchResult()
    merged.CopyFrom(result)
    merged.budget_used.CopyFrom(spent.budget_used)
    merged.started_at = spent.started_at
    merged.strategy = merged.strategy or spent.strategy
    return merged


def encode_job(job: orchestrator_pb2.SearchJob) -> str:
    """The Celery argument for a job: JSON-safe base64 of the protobuf."""
    return base64.b64encode(job.SerializeToString()).decode("ascii")


def decode_job(payload: str) -> orchestrator_pb2.SearchJob:
    job = orchestrator_pb2.SearchJob()
    job.ParseFromString(base64.b64decode(payload))
    return job


def decode_result(raw: bytes | None) -> orchestrator_pb2.SearchResult | None:
    if raw is None:
        return None
    result = orchestrator_pb2.SearchResult()
    result.ParseFromString(raw)
    return result


# A worker's start of a delivered job, in one round trip: is there a result already, is the job
# cancelled, can it take the lease - and, only when it may run, the record's ``running`` fields.
# A delivered job is no longer pending (pending.py): kombu holds its message as unacknowledged.
_START = """
local has_result = redis.call('EXISTS', KEYS[1])
local cancelled = redis.call('EXISTS', KEYS[2])
local leased = redis.call('SET', KEYS[3], ARGV[1], 'NX', 'EX', ARGV[2])
redis.call('HDEL', KEYS[5], ARGV[4])
redis.call('ZREM', KEYS[6], ARGV[4])
if leased and has_result == 0 and cancelled == 0 then
  redis.call('HSET', KEYS[4], unpack(ARGV, 5))
  redis.call('EXPIRE', KEYS[4], ARGV[3])
end
return {has_result, cancelled, leased and 1 or 0}
"""


class JobEvents:
    """Publishing side (worker) and reading side (gateway) of one job's Redis records."""

    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s
        self._start = client.register_script(_START)

    async def start(self, job_id: str, worker: str, lease_ttl_s: int, started_at: float) -> tuple[bool, bool, bool]:
        """``(has a result, cancelled, leased)`` for a delivered job; when it has no result, is not
        cancelled and the lease was taken, its record is ``running`` (``started_at``, ``worker``).
        Either way the job is no longer pending (``pending.py``)."""
        mapping = status_fields(RUNNING, started_at=started_at, worker=worker)
        keys = [result_key(job_id), cancel_key(job_id), lease_key(job_id), job_key(job_id), PENDING, PENDING_SINCE]
        args: list[str | int] = [worker, lease_ttl_s, self.ttl_s, job_id]
        for name, value in mapping.items():
            args += [name, value]
        has_result, cancelled, leased = await self._start(keys=keys, args=args)
        return bool(has_result), bool(cancelled), bool(leased)

    async def publish(self, job_id: str, event: orchestrator_pb2.JobEvent) -> None:
        """Append an event to the job's stream (and keep the stream's TTL alive)."""
        key = events_key(job_id)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {_EVENT_FIELD: event.SerializeToString()}, maxlen=10_000, approximate=True)
            pipe.expire(key, self.ttl_s)
            await pipe.execute()

    async def record_result(
        self,
        result: orchestrator_pb2.SearchResult,
        status: JobStatus,
        before: Sequence[orchestrator_pb2.JobEvent] = (),
        also: Callable[[Pipeline], None] | None = None,
    ) -> bool:
        """Record the job's one result; False when a result was already recorded (redelivery).

        Only the recorder publishes: ``before`` (e.g. the answer deltas), the status update and
        the result event go out in one pipeline after the SET NX succeeded, so a duplicate run
        never adds events to the stream. ``also`` adds unconditional writes (the search trace)
        to the SET NX's own round trip, in one transaction with it.
        """
        job_id = result.job_id
        payload = result.SerializeToString()
        if also is None:
            stored = await self.client.set(result_key(job_id), payload, nx=True, ex=self.ttl_s)
        else:
            async with self.client.pipeline(transaction=True) as first:
                also(first)
                first.set(result_key(job_id), payload, nx=True, ex=self.ttl_s)
                stored = (await first.execute())[-1]
        if not stored:
            return False
        key = events_key(job_id)
        events = [*before, orchestrator_pb2.JobEvent(job_id=job_id, result=result)]
        # The record holds the typed error too (GET /v1/jobs/{id} reads it).
        error = JobError.of_result(result)
        extra = {} if error is None else {"error": error}
        mapping = status_fields(status, finished_at=time.time(), **extra)
        # One transaction: a reader blocked in XREAD wakes once, to the answer and the result together.
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(job_key(job_id), mapping=mapping)  # type: ignore[arg-type]
            pipe.expire(job_key(job_id), self.ttl_s)
            for event in events:
                pipe.xadd(key, {_EVENT_FIELD: event.SerializeToString()}, maxlen=10_000, approximate=True)
            pipe.expire(key, self.ttl_s)
            await pipe.execute()
        return True

    async def set_status(self, job_id: str, status: JobStatus, **fields: object) -> None:
        """Update the job record's status and the named status fields (validated by ``JobRecord``)."""
        mapping = status_fields(status, **fields)
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.hset(job_key(job_id), mapping=mapping)  # type: ignore[arg-type]
            pipe.expire(job_key(job_id), self.ttl_s)
            await pipe.execute()

    async def record_spent(self, result: orchestrator_pb2.SearchResult) -> None:
        """Keep what a cancelled job had spent (its worker's cancelled ``result``) beside the
        cancellation the gateway recorded first; ``result()`` reads the two as one."""
        await self.client.set(spent_key(result.job_id), result.SerializeToString(), ex=self.ttl_s)

    async def result(self, job_id: str) -> orchestrator_pb2.SearchResult | None:
        """The job's one result (with its worker's spend when the gateway recorded its
        cancellation: ``with_spend``), or None while it has none; one round trip."""
        raw, spent = await self.client.mget([result_key(job_id), spent_key(job_id)])
        result = decode_result(_raw(raw))
        return None if result is None else with_spend(result, decode_result(_raw(spent)))

    async def cancel(self, job_id: str) -> None:
        """Ask whichever worker holds the job (or will pick it up) to stop it."""
        await self.client.set(cancel_key(job_id), b"1", ex=self.ttl_s)
        await self.client.publish(CANCEL_CHANNEL, job_id)

    async def cancelled(self, job_id: str) -> bool:
        return bool(await self.client.exists(cancel_key(job_id)))

    async def follow(
        self, job_id: str, last_id: str = "0-0", block_ms: int = 2000, until: float | None = None
    ) -> AsyncIterator[tuple[str, orchestrator_pb2.JobEvent]]:
        """Yield ``(stream id, event)`` from ``last_id`` on, until the result event; blocks between
        events (each wait costs a round trip and a result-key check when it times out, so it is
        long: a result whose event never reached the stream is found within ``block_ms``).
        Stops without a result once ``time.monotonic()`` passes ``until``."""
        key = events_key(job_id)
        while True:
            if until is not None and time.monotonic() > until:
                return
            reply: Any = await self.client.xread({key: last_id}, count=100, block=block_ms)
            if not reply:
                # No event within block_ms: a result may have been recorded without its event
                # reaching the stream (worker killed in between) - check the result key.
                result = await self.result(job_id)
                if result is not None:
                    yield last_id, orchestrator_pb2.JobEvent(job_id=job_id, result=result)
                    return
                continue
            for _stream, entries in reply:
                for entry_id, fields in entries:
                    last_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
                    event = orchestrator_pb2.JobEvent()
                    event.ParseFromString(fields[_EVENT_FIELD])
                    yield last_id, event
                    if event.HasField("result"):
                        return
