"""Batching the search's reasoning deltas into few job events.

A search of 8 candidates decodes 8 streams of tokens at once; one job event (one Redis XADD,
one wake-up of the gateway's reader) per token would cost more than the tokens. The search
hands every delta to :meth:`ReasoningBatcher.add` (synchronous, it only buffers); the first
delta of a window starts a timer, and when it fires (``WINDOW_S`` later, and never sooner than
``MIN_INTERVAL_S`` after the job's last reasoning event) everything buffered goes out as ONE
``JobEvent.reasoning`` holding a ``ReasoningDelta`` per source and kind, the text of a source's
consecutive deltas of one kind joined.

Why both: on a loaded engine one decode step of a request takes longer than the window, so a
window alone sends one event per step (each an XADD, an XREAD, a parse and an SSE chunk per
source, at the worker, the gateway and the client). The interval caps a job's reasoning events
at a few per second whatever the step time, which keeps streaming's cost within a few percent
of not streaming (``benchmarks/streaming_bench.py``); the first event still leaves one window
after the first token.

Order: within a source, deltas keep their order; between sources, a window lists them by first
appearance (an event that follows a candidate's tokens in the window follows them in the
event). The owner calls :meth:`flush` before anything else it publishes (an answer delta, the
result), so a job's stream reads in order: reasoning, answer, result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import ReasoningDelta

log = logging.getLogger(__name__)

#: how long deltas gather before they go out: short enough to read as live (a 20 Hz refresh),
#: long enough that a window holds many tokens of every candidate
WINDOW_S = 0.05
#: the least time between two reasoning events of one job (a 2 Hz refresh at most)
MIN_INTERVAL_S = 0.5

Publish = Callable[[orchestrator_pb2.ReasoningDeltas], Awaitable[None]]


class ReasoningBatcher:
    """Coalesces reasoning deltas per source within a window into one ``ReasoningDeltas``."""

    def __init__(self, publish: Publish, window_s: float = WINDOW_S, min_interval_s: float = MIN_INTERVAL_S) -> None:
        self._publish = publish
        self._window_s = window_s
        self._min_interval_s = min_interval_s
        self._last_sent: float | None = None  # loop time of the last event sent
        # source -> its pieces in order, each [kind, text parts]; dicts keep first appearance
        self._pending: dict[str, list[tuple[str, list[str]]]] = {}
        self._timer: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()  # one publish at a time: events leave in order
        self.published = 0  # job events sent (what the batching saves shows in tests)

    def add(self, delta: ReasoningDelta) -> None:
        """Buffer ``delta``; the window's timer sends it (a ``ReasoningSink``)."""
        pieces = self._pending.setdefault(delta.source, [])
        if pieces and pieces[-1][0] == delta.kind and delta.kind == "tokens":
            pieces[-1][1].append(delta.text)
        else:
            pieces.append((delta.kind, [delta.text]))
        if self._timer is None:
            loop = asyncio.get_running_loop()
            wait = self._window_s
            if self._last_sent is not None:
                wait = max(wait, self._last_sent + self._min_interval_s - loop.time())
            self._timer = loop.create_task(self._after_window(wait))

    async def _after_window(self, wait: float) -> None:
        await asyncio.sleep(wait)
        self._timer = None
        await self._send()

    async def flush(self) -> None:
        """Send what is buffered now (before the job publishes anything else)."""
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await timer
        await self._send()

    def close(self) -> None:
        """Drop what is buffered (the job was cancelled: nobody reads on)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._pending = {}

    async def _send(self) -> None:
        async with self._lock:
            pending, self._pending = self._pending, {}
            if not pending:
                return
            batch = orchestrator_pb2.ReasoningDeltas(
                deltas=[
                    orchestrator_pb2.ReasoningDelta(source=source, kind=kind, text="".join(parts))
                    for source, pieces in pending.items()
                    for kind, parts in pieces
                ]
            )
            try:
                await self._publish(batch)
                self.published += 1
                self._last_sent = asyncio.get_running_loop().time()
            except Exception:  # reasoning is best-effort: a Redis blip must not fail the search
                log.warning("publishing reasoning failed", exc_info=True)
