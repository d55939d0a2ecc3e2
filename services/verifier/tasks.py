"""Bounded concurrency that cancels the rest when one task fails.

``asyncio.gather`` leaves siblings running after a failure; a verifier whose policy went
down must stop issuing calls at once and answer UNAVAILABLE, so the remaining work is
cancelled. Work is passed as factories so a cancelled, never-started item leaves no
un-awaited coroutine behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def run_bounded(factories: Sequence[Callable[[], Awaitable[T]]], limit: int) -> list[T]:
    """Await every factory's result with at most ``limit`` in flight, in input order."""
    semaphore = asyncio.Semaphore(max(1, limit))

    async def run(factory: Callable[[], Awaitable[T]]) -> T:
        async with semaphore:
            return await factory()

    tasks = [asyncio.ensure_future(run(f)) for f in factories]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
