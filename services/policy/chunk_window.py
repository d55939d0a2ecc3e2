"""Holding a stream's chunks for a caller that asked for coarse ones (``chunk_interval_ms``).

Every chunk costs both ends a protobuf message, a gRPC write and a read, per candidate per
decoded token. The worker streams every policy call, so that a call cut off by a cancel or a
deadline still tells it what it cost; most of those calls hand no text on as it comes, and for
them per-token chunks measured 10-15% of the engine's decode rate on 2 cores
(``benchmarks/throughput_bench.py``). Such a caller asks for at most one chunk per interval:
the chunks of the interval are merged per candidate (texts and logprobs joined in order, the
latest token count). The call's first chunk (it carries the prompt's count) and a candidate's
final chunk (its finish reason) go out at once, so only the accounting of a cut-off call can
lag, by at most one interval of tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from services.gen.ttc.v1 import policy_pb2

FINISHED = policy_pb2.FINISH_REASON_UNSPECIFIED


def merge(into: policy_pb2.GenerateChunk, chunk: policy_pb2.GenerateChunk) -> None:
    """Append ``chunk`` (a later chunk of the same candidate) to ``into``."""
    into.text_delta += chunk.text_delta
    into.logprobs.extend(chunk.logprobs)
    into.tool_calls.extend(chunk.tool_calls)
    into.completion_tokens = max(into.completion_tokens, chunk.completion_tokens)
    if chunk.finish_reason != FINISHED:
        into.finish_reason = chunk.finish_reason


class ChunkWindow:
    """Chunks to send now, for a stream that wants at most one per ``interval_s`` (0: every
    chunk as it comes)."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self._interval = interval_s
        self._clock = clock
        self._pending: dict[int, policy_pb2.GenerateChunk] = {}
        self._last = clock()

    def add(self, chunk: policy_pb2.GenerateChunk) -> list[policy_pb2.GenerateChunk]:
        if self._interval <= 0:
            return [chunk]
        held = self._pending.get(chunk.index)
        if held is None:
            held = self._pending[chunk.index] = policy_pb2.GenerateChunk()
            held.CopyFrom(chunk)
        else:
            merge(held, chunk)
        if chunk.prompt_tokens or (self._clock() - self._last) >= self._interval:
            return self.drain()
        if chunk.finish_reason != FINISHED:
            return [self._pending.pop(chunk.index)]
        return []

    def drain(self) -> list[policy_pb2.GenerateChunk]:
        """Everything held, one chunk per candidate in the order each was first held."""
        out = list(self._pending.values())
        self._pending.clear()
        self._last = self._clock()
        return out
