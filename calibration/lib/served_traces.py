"""Served traces read from Redis for an export: only the traces whose recorded owner (the API
key name that created the job, ``services/jobs/trace_store.py``) is one of the opted-in keys.

The owner keys are scanned and a trace is loaded only when its owner opted in, so another key's
prompts are never read; the export filters by owner again (:mod:`evaluation.training.served`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

import redis.asyncio as aioredis

from services.jobs.trace_store import TraceStore, owner_key, trace_key

_PREFIX = trace_key("")
_SUFFIX = owner_key("")[len(_PREFIX) :]


async def _read(url: str, keys: Collection[str]) -> dict[str, tuple[dict[str, Any], str]]:
    client = aioredis.Redis.from_url(url)
    store = TraceStore(client, ttl_s=0)  # read only: the TTL is never used
    found: dict[str, tuple[dict[str, Any], str]] = {}
    try:
        async for raw in client.scan_iter(match=owner_key("*"), count=500):
            name = raw.decode() if isinstance(raw, bytes) else str(raw)
            trace_id = name[len(_PREFIX) : -len(_SUFFIX)]
            owner = await client.get(name)
            if (owner.decode() if isinstance(owner, bytes) else owner) not in keys:
                continue
            doc, recorded = await store.load_with_owner(trace_id)
            if doc is not None and recorded in keys:
                found[trace_id] = (doc, recorded)
    finally:
        await client.aclose()
    return found


def read_opted_in(url: str, keys: Collection[str]) -> dict[str, tuple[dict[str, Any], str]]:
    """Trace id -> (trace document, owner) for every stored trace an opted-in key owns."""
    return asyncio.run(_read(url, keys)) if keys else {}
