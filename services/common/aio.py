"""Small asyncio helpers shared by services."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def merge(
    sources: Sequence[AsyncIterator[T]],
    on_unfinished: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[T]:
    """Yield items from every source as they arrive, each source in its own task.

    The first error of any source is raised to the consumer. When the consumer stops early
    (cancelled, an error, or it simply leaves), the unfinished sources are cancelled, and
    ``on_unfinished`` runs first so engines can free their requests at once rather than when
    the generators are collected.
    """
    queue: asyncio.Queue[tuple[T] | BaseException | None] = asyncio.Queue()

    async def pump(source: AsyncIterator[T]) -> None:
        try:
            async for item in source:
                queue.put_nowait((item,))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the consumer, which re-raises it
            queue.put_nowait(exc)
        finally:
            queue.put_nowait(None)

    tasks = [asyncio.create_task(pump(source)) for source in sources]
    done = 0
    try:
        while done < len(tasks):
            item = await queue.get()
            if item is None:
                done += 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield item[0]
    finally:
        unfinished = [t for t in tasks if not t.done()]
        if unfinished and on_unfinished is not None:
            await asyncio.shield(on_unfinished())
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
