"""The Responses store: each stored response's conversation and final object, in Redis with a TTL.

Key ``ttc:response:<job id>`` holds one JSON document: the key that made it (``caller``;
another key gets 404, as for an unknown id), the conversation up to this response's input
(``input``: the items ``previous_response_id`` continues from, with this response's output
appended once it is known), the final ``response`` object once the job has finished, and a
``deleted`` tombstone after ``DELETE``. ``store: false`` writes nothing here: such a response
lives only in its job record (``ttc:job:<id>``, the one job store) for as long as jobs do.
"""

from __future__ import annotations

from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, Field

KEY_PREFIX = "ttc:response:"


def response_key(job_id: str) -> str:
    return f"{KEY_PREFIX}{job_id}"


class StoredResponse(BaseModel):
    caller: str | None = None
    input: list[dict[str, Any]] = Field(default_factory=list)
    response: dict[str, Any] | None = None
    deleted: bool = False

    def visible_to(self, caller: str | None) -> bool:
        """``caller`` None is an admin view; a record without a caller is visible to every key."""
        return caller is None or self.caller is None or self.caller == caller


class ResponseStore:
    def __init__(self, client: aioredis.Redis, ttl_s: int) -> None:
        self.client = client
        self.ttl_s = ttl_s

    async def get(self, job_id: str) -> StoredResponse | None:
        raw = await self.client.get(response_key(job_id))
        if raw is None:
            return None
        return StoredResponse.model_validate_json(raw)

    async def put(self, job_id: str, entry: StoredResponse) -> None:
        """Write the entry; the TTL counts from the response's creation, not from each update."""
        data = entry.model_dump_json()
        if not await self.client.set(response_key(job_id), data, xx=True, keepttl=True):
            await self.client.set(response_key(job_id), data, ex=self.ttl_s)

    async def delete(self, job_id: str, caller: str | None) -> None:
        """Forget the conversation; a tombstone keeps the id answering 404 until the TTL ends."""
        await self.client.set(
            response_key(job_id), StoredResponse(caller=caller, deleted=True).model_dump_json(), ex=self.ttl_s
        )
