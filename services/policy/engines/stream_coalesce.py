"""Merging the stream deltas that are ready together into one delta per candidate.

The decode loop emits one delta per candidate per token. Handing each to the event loop and on
to gRPC as its own message costs a thread wake-up, a protobuf message and an orchestrator
callback per token per candidate, which the streaming benchmark measured as the gap between a
streamed and an unstreamed search (``benchmarks/streaming_bench.py``). Deltas that are already
waiting when the consumer comes to read are merged instead: nothing waits to be merged (no timer,
so the first token is never held back), and a slow consumer gets fewer, larger messages rather
than a growing backlog.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from services.policy.engines.base import StreamDelta


def coalesce(deltas: list[StreamDelta]) -> list[StreamDelta]:
    """One delta per candidate, in the order each candidate first appears: its texts and its
    tokens' logprobs joined in order, its largest token count, its finish reason and tool calls
    (only a candidate's last delta carries them, and nothing of that candidate follows it)."""
    merged: dict[int, StreamDelta] = {}
    for delta in deltas:
        seen = merged.get(delta.index)
        if seen is None:
            merged[delta.index] = StreamDelta(
                delta.index,
                delta.text,
                delta.finish_reason,
                delta.completion_tokens,
                list(delta.tool_calls),
                list(delta.logprobs),
            )
            continue
        seen.text += delta.text
        seen.logprobs.extend(delta.logprobs)
        seen.completion_tokens = max(seen.completion_tokens, delta.completion_tokens)
        seen.finish_reason = delta.finish_reason or seen.finish_reason
        seen.tool_calls.extend(delta.tool_calls)
    return list(merged.values())


class DeltaMailbox:
    """Collects deltas from the decode thread and hands them to the event loop in batches.

    ``put`` (decode thread) appends and schedules at most one hand-over at a time; the hand-over
    (event loop) passes everything collected so far to ``deliver``. A decode step that emits for
    n candidates therefore wakes the loop once, not n times. Hand-overs are scheduled with
    ``call_soon_threadsafe``, so they stay in order with anything else the thread schedules after
    them (the task's result)."""

    def __init__(self, schedule: Callable[[Callable[[], None]], object], deliver: Callable[[list[StreamDelta]], None]):
        self._schedule = schedule
        self._deliver = deliver
        self._lock = threading.Lock()
        self._pending: list[StreamDelta] = []

    def put(self, delta: StreamDelta) -> None:
        with self._lock:
            self._pending.append(delta)
            first = len(self._pending) == 1
        if first:
            self._schedule(self._hand_over)

    def _hand_over(self) -> None:
        with self._lock:
            batch, self._pending = self._pending, []
        if batch:
            self._deliver(batch)
