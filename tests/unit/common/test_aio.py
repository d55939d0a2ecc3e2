"""merge(): items from concurrent sources, first error raised, early exit cleans up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from services.common.aio import merge


async def counted(name: str, n: int, delay: float = 0.0) -> AsyncIterator[str]:
    for i in range(n):
        await asyncio.sleep(delay)
        yield f"{name}{i}"


async def failing() -> AsyncIterator[str]:
    yield "ok"
    raise RuntimeError("source broke")


async def test_every_item_of_every_source_arrives() -> None:
    items = [x async for x in merge([counted("a", 3), counted("b", 2)])]
    assert sorted(items) == ["a0", "a1", "a2", "b0", "b1"]


async def test_the_first_source_error_reaches_the_consumer() -> None:
    with pytest.raises(RuntimeError, match="source broke"):
        async for _ in merge([failing(), counted("slow", 5, delay=0.05)]):
            pass


async def test_leaving_early_runs_the_cleanup_and_cancels_sources() -> None:
    cleaned: list[bool] = []

    async def cleanup() -> None:
        cleaned.append(True)

    stream = merge([counted("x", 1000, delay=0.01)], on_unfinished=cleanup)
    assert await anext(stream) == "x0"
    await stream.aclose()
    assert cleaned == [True]
