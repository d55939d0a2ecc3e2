"""The chaos suite's count of lost and duplicated jobs, read from Redis itself.

Lost jobs are found by scanning every job record the stack's Redis holds (``ttc:job:<id>``
hashes), not only the ids clients happened to receive: a job enqueued for a request whose
client never saw its id (a stream cut before its first chunk, a reply lost in transit) is
still checked. Every record must reach a final status and have its result
(``ttc:job:<id>:result``); every id a client received must have a record.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from services.jobs import events

_PREFIX = "ttc:job:"
_FINAL = frozenset({events.SUCCEEDED, events.FAILED, events.CANCELLED})


def record_id(key: str) -> str:
    """The job id of a job record's key, '' for the job's other keys (events, result, lease...)."""
    rest = key.removeprefix(_PREFIX)
    return rest if rest != key and rest and ":" not in rest else ""


@dataclass
class RecordScan:
    """What the scan found: ``records`` job records; the ids that are not final, final without a
    result, or that a client received but Redis has no record of."""

    records: int = 0
    ids: list[str] = field(default_factory=list)
    not_final: list[str] = field(default_factory=list)
    without_result: list[str] = field(default_factory=list)
    unrecorded: list[str] = field(default_factory=list)

    @property
    def lost(self) -> int:
        return len(self.not_final) + len(self.without_result) + len(self.unrecorded)

    def figures(self) -> dict[str, Any]:
        out = asdict(self)
        del out["ids"]
        return out


async def _scan_once(client: Any, received: set[str]) -> RecordScan:
    ids = sorted({record_id(k.decode()) async for k in client.scan_iter(match=_PREFIX + "*", count=500)} - {""})
    scan = RecordScan(records=len(ids), ids=ids)
    for job_id in ids:
        status = await client.hget(events.job_key(job_id), "status")
        if status is None or json.loads(status) not in _FINAL:
            scan.not_final.append(job_id)
        elif not await client.exists(events.result_key(job_id)):
            scan.without_result.append(job_id)
    scan.unrecorded = sorted(i for i in received if i and i not in set(ids))
    return scan


async def scan_records(redis_url: str, received: set[str], wait_s: float, log: Callable[[str], None]) -> RecordScan:
    """Scan every job record, waiting up to ``wait_s`` for those still queued or running to end."""
    import redis.asyncio as aredis

    client = aredis.Redis.from_url(redis_url)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            scan = await _scan_once(client, received)
            if not scan.not_final or time.monotonic() > deadline:
                return scan
            log(f"waiting for {len(scan.not_final)} of {scan.records} job records to reach a final status")
            await asyncio.sleep(2)
    finally:
        await client.aclose()


def count_result_events(redis_url: str, job_ids: list[str]) -> dict[str, int]:
    """Result events on each job's stream (more than one: a duplicated result)."""
    import redis

    from services.gen.ttc.v1 import orchestrator_pb2

    client: Any = redis.Redis.from_url(redis_url)
    counts: dict[str, int] = {}
    for job_id in job_ids:
        n = 0
        for _, fields in client.xrange(events.events_key(job_id)):
            event = orchestrator_pb2.JobEvent()
            event.ParseFromString(fields[b"e"])
            n += event.HasField("result")
        counts[job_id] = n
    return counts
