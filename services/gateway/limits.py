"""Per-key request-rate and token-budget limits, counted in Redis so every gateway replica agrees.

Fixed one-minute windows: cheap (one INCR per request), shared across replicas, and the
``Retry-After`` is simply the time left in the window. The token budget is checked before a
request (refused once the window's tokens are spent) and charged with the actual usage after
it, reasoning tokens included - hidden compute is what the budget is for.
"""

from __future__ import annotations

import time

import redis.asyncio as aioredis

from services.gateway.errors import too_many

WINDOW_S = 60


class Limiter:
    def __init__(self, client: aioredis.Redis, requests_per_minute: int, tokens_per_minute: int) -> None:
        self.client = client
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute

    @staticmethod
    def _window(now: float) -> tuple[int, int]:
        window = int(now // WINDOW_S)
        retry_after = max(1, int((window + 1) * WINDOW_S - now) + 1)
        return window, retry_after

    async def check(self, caller: str) -> None:
        """Count one request for ``caller``; raise 429 when its rate or token budget is spent."""
        if not self.rpm and not self.tpm:
            return
        window, retry_after = self._window(time.time())
        if self.tpm:
            spent = int(await self.client.get(f"ttc:limit:tokens:{caller}:{window}") or 0)
            if spent >= self.tpm:
                raise too_many(
                    f"token budget of {self.tpm} tokens per minute spent for this API key",
                    retry_after,
                    "tokens_exceeded",
                )
        if self.rpm:
            key = f"ttc:limit:requests:{caller}:{window}"
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.incr(key)
                pipe.expire(key, 2 * WINDOW_S)
                count, _ = await pipe.execute()
            if int(count) > self.rpm:
                raise too_many(f"rate limit of {self.rpm} requests per minute reached for this API key", retry_after)

    async def charge(self, caller: str, tokens: int) -> None:
        """Add a finished request's tokens to the caller's window."""
        if not self.tpm or tokens <= 0:
            return
        window, _ = self._window(time.time())
        key = f"ttc:limit:tokens:{caller}:{window}"
        async with self.client.pipeline(transaction=False) as pipe:
            pipe.incrby(key, tokens)
            pipe.expire(key, 2 * WINDOW_S)
            await pipe.execute()
