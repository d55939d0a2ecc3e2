"""Jobs sent to a queue that no worker has started yet, kept beside the broker so none is lost.

kombu's Redis transport takes a message off the queue's list (BRPOP) and only then, in a second
round trip, registers it as unacknowledged (the ``unacked`` hash its own restore sweep reads). A
worker killed between the two drops the message: it is in neither place, no sweep of kombu's
brings it back, and the job's record stays ``queued`` for ever.

So the gateway also writes each job's message here, in the transaction that enqueues it
(:func:`add`); a worker's start of the job removes it (``events.JobEvents.start``, in the same
script that takes the lease); and each worker sweeps (:class:`PendingSweeper`): a job pending
longer than the grace whose message is neither on its queue's list nor unacknowledged is sent
again. A copy sent by a sweep that raced a worker between its two round trips is harmless: the
runner's lease and result key run a job once (``services/orchestrator/worker.py``).

- ``ttc:jobs:pending``        hash: job id → ``{"queue": ..., "message": ...}`` (the broker message)
- ``ttc:jobs:pending_since``  sorted set: job id → when it was (last) sent
- ``ttc:jobs:<queue>:sweep``  the lock one sweep of a queue holds
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline

PENDING = "ttc:jobs:pending"
PENDING_SINCE = "ttc:jobs:pending_since"
# kombu's Redis transport's hash of unacknowledged messages (its ``unacked_key`` default).
UNACKED = "unacked"


def sweep_lock_key(queue: str) -> str:
    return f"ttc:jobs:{queue}:sweep"


def add(pipe: Pipeline, queue: str, job_id: str, message: str, sent_at: float) -> None:
    """Add to ``pipe`` (the enqueue's transaction) the writes that keep ``job_id`` pending."""
    pipe.hset(PENDING, job_id, json.dumps({"queue": queue, "message": message}))
    pipe.zadd(PENDING_SINCE, {job_id: sent_at})


def task_id(message: bytes | str) -> str | None:
    """The task id (the job id) of a broker message as kombu stores it on a queue's list."""
    try:
        parsed = json.loads(message)
        return str(parsed["headers"]["id"])
    except (ValueError, KeyError, TypeError):
        return None


def unacked_task_id(entry: bytes | str) -> str | None:
    """The task id of an ``unacked`` hash entry (kombu stores ``[message, exchange, routing key]``)."""
    try:
        parsed = json.loads(entry)
        return str(parsed[0]["headers"]["id"])
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def with_new_delivery_tag(message: str) -> str:
    """``message`` with a fresh delivery tag: kombu keys unacknowledged messages by it, so a copy
    sent again must not share the tag of one a worker may still hold."""
    parsed = json.loads(message)
    parsed["properties"]["delivery_tag"] = str(uuid.uuid4())
    return json.dumps(parsed)


@dataclass(frozen=True)
class Sweep:
    """What one sweep of a queue did."""

    resent: tuple[str, ...] = ()  # jobs whose message was lost, sent again
    dropped: tuple[str, ...] = ()  # entries of jobs that already have a result (cancelled while queued)


class PendingSweeper:
    """Finds the jobs of one queue whose message was lost, and sends them again.

    ``result_key`` is the job contract's name of a job's result key (``events.result_key``): a
    pending job that has a result (cancelled before any worker took it) is not sent again."""

    def __init__(
        self, client: aioredis.Redis, queue: str, grace_s: float, result_key: Callable[[str], str], lock_s: float = 30.0
    ) -> None:
        self.client = client
        self.queue = queue
        self.grace_s = grace_s
        self.result_key = result_key
        self.lock_s = lock_s

    async def sweep(self, now: float) -> Sweep:
        """One sweep at ``now`` (``time.time()``). Cheap when nothing is overdue: one read of the
        jobs pending longer than the grace. Only then is the lock taken (one sweeper of a queue at
        a time) and the queue's list and the unacknowledged messages read."""
        due = await self.client.zrangebyscore(PENDING_SINCE, "-inf", now - self.grace_s)
        overdue = [_text(job_id) for job_id in due if isinstance(job_id, (bytes, str))]
        if not overdue:
            return Sweep()
        lock = sweep_lock_key(self.queue)
        if not await self.client.set(lock, "1", nx=True, px=int(self.lock_s * 1000)):
            return Sweep()
        try:
            return await self._sweep(overdue, now)
        finally:
            await self.client.delete(lock)

    async def _sweep(self, overdue: list[str], now: float) -> Sweep:
        entries = await self.client.hmget(PENDING, overdue)
        mine: dict[str, str] = {}
        gone: list[str] = []
        for job_id, raw in zip(overdue, entries, strict=True):
            if raw is None:
                gone.append(job_id)  # started between the two reads, or never written
                continue
            entry = json.loads(raw)
            if entry.get("queue") == self.queue:
                mine[job_id] = str(entry["message"])
        if not mine:
            await self._forget(gone)
            return Sweep()
        listed = {task_id(message) for message in await self.client.lrange(self.queue, 0, -1)}
        held = {unacked_task_id(entry) for entry in await self.client.hvals(UNACKED)}
        lost = [job_id for job_id in mine if job_id not in listed and job_id not in held]
        answered = await self._answered(lost)
        resent = [job_id for job_id in lost if job_id not in answered]
        async with self.client.pipeline(transaction=True) as pipe:
            for job_id in resent:
                # RPUSH: the head of the list, where kombu's own restore puts a message back.
                pipe.rpush(self.queue, with_new_delivery_tag(mine[job_id]))
                pipe.zadd(PENDING_SINCE, {job_id: now})
            await pipe.execute()
        await self._forget([*gone, *answered])
        return Sweep(resent=tuple(resent), dropped=tuple(answered))

    async def _answered(self, job_ids: list[str]) -> list[str]:
        """Those of ``job_ids`` that have a result."""
        if not job_ids:
            return []
        async with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.exists(self.result_key(job_id))
            found = await pipe.execute()
        return [job_id for job_id, exists in zip(job_ids, found, strict=True) if exists]

    async def _forget(self, job_ids: list[str]) -> None:
        if job_ids:
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.hdel(PENDING, *job_ids)
                pipe.zrem(PENDING_SINCE, *job_ids)
                await pipe.execute()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
