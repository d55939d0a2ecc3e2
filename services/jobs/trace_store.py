"""Search traces in Redis with a TTL, as JSON (what ``GET /v1/traces/{id}`` and the viewer read)."""

from __future__ import annotations

import json
from typing import Any

import redis.asyncio as aioredis
from google.protobuf.json_format import MessageToDict

from services.gen.ttc.v1 import orchestrator_pb2


def trace_key(trace_id: str) -> str:
    return f"ttc:trace:{trace_id}"


class TraceStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def save(self, trace: orchestrator_pb2.SearchTrace) -> None:
        doc = MessageToDict(trace, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
        await self.client.set(trace_key(trace.trace_id), json.dumps(doc), ex=self.ttl_s)

    async def load(self, trace_id: str) -> dict[str, Any] | None:
        raw = await self.client.get(trace_key(trace_id))
        return None if raw is None else dict(json.loads(raw))
