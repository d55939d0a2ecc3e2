"""A bounded pool of execution slots with a bounded queue in front of it.

Each slot owns a host uid (``uid_base + i``): RLIMIT_NPROC counts processes per uid across
the whole host, so giving every concurrent execution its own uid makes the limit mean "this
execution's processes", and no slot can exhaust another's. A slot is reused only after its
previous execution's PID namespace is gone, so its uid owns no processes when handed out.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from services.common.errors import ResourceExhausted


class ExecutionPool:
    """``max_concurrency`` slots; at most ``max_queue`` callers wait; the rest are refused."""

    def __init__(
        self,
        max_concurrency: int,
        max_queue: int,
        uid_base: int | None,
        on_change: Callable[[int, int], None] = lambda waiting, running: None,
    ) -> None:
        self.max_queue = max_queue
        self.on_change = on_change
        self._free: asyncio.Queue[int | None] = asyncio.Queue()
        for i in range(max_concurrency):
            self._free.put_nowait(None if uid_base is None else uid_base + i)
        self.capacity = max_concurrency
        self.waiting = 0
        self.running = 0

    def _changed(self) -> None:
        self.on_change(self.waiting, self.running)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int | None]:
        """Hold one slot (its uid) for the body; ``ResourceExhausted`` when the queue is full."""
        if self._free.empty() and self.waiting >= self.max_queue:
            raise ResourceExhausted(
                f"sandbox busy: {self.running} executions running and {self.waiting} queued (max {self.max_queue})"
            )
        self.waiting += 1
        self._changed()
        try:
            uid = await self._free.get()
        finally:
            self.waiting -= 1
            self._changed()
        self.running += 1
        self._changed()
        try:
            yield uid
        finally:
            self.running -= 1
            self._free.put_nowait(uid)
            self._changed()
