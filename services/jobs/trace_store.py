"""Search traces in Redis with a TTL, as JSON (what ``GET /v1/traces/{id}`` and the viewer read).

A trace holds the prompt and every candidate, so it is as private as the request: the store
records its owner (the API key name that created the job, ``SearchJob.owner``) next to it,
written in the same transaction, and ``readable_by`` is the one rule the gateway applies.
"""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis
from google.protobuf.json_format import MessageToDict
from redis.asyncio.client import Pipeline

from services.gen.ttc.v1 import orchestrator_pb2


def trace_key(trace_id: str) -> str:
    return f"ttc:trace:{trace_id}"


def owner_key(trace_id: str) -> str:
    return f"ttc:trace:{trace_id}:owner"


def readable_by(owner: str | None, caller: str, admin: bool = False) -> bool:
    """Whether ``caller`` may read a trace owned by ``owner``: its owner, or an admin. A trace
    without a recorded owner (one from ``RunSearch``, which has no API key) only an admin reads."""
    return admin or (bool(owner) and owner == caller)


class TraceStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def save(self, trace: orchestrator_pb2.SearchTrace, owner: str = "") -> None:
        async with self.client.pipeline(transaction=True) as pipe:
            self.queue_save(pipe, trace, owner)
            await pipe.execute()

    def queue_save(self, pipe: Pipeline, trace: orchestrator_pb2.SearchTrace, owner: str = "") -> None:
        """Add the trace's writes to ``pipe`` (a worker sends them with its result: one round trip)."""
        doc = MessageToDict(trace, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        pipe.set(trace_key(trace.trace_id), json.dumps(doc), ex=self.ttl_s)
        if owner:
            pipe.set(owner_key(trace.trace_id), owner, ex=self.ttl_s)
        else:
            pipe.delete(owner_key(trace.trace_id))

    async def load(self, trace_id: str) -> dict[str, Any] | None:
        raw = await self.client.get(trace_key(trace_id))
        return None if raw is None else dict(json.loads(raw))

    async def load_with_owner(self, trace_id: str) -> tuple[dict[str, Any] | None, str]:
        """The trace (``None`` when unknown or expired) and its recorded owner (empty when none)."""
        raw, owner = await self.client.mget(trace_key(trace_id), owner_key(trace_id))
        doc = None if raw is None else dict(json.loads(raw))
        return doc, (owner.decode() if isinstance(owner, bytes) else str(owner or ""))
