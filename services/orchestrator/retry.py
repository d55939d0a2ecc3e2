"""Waiting for a policy that restarts: UNAVAILABLE calls retried with a capped backoff.

A policy restart (a deploy, a crash the supervisor heals, a model reload) refuses connections
for some seconds. A job that calls the policy then should be answered late, not failed: the
worker retries an UNAVAILABLE call after 0.1 s, doubling up to 2 s, until
``TTC_ORCHESTRATOR_POLICY_WAIT_S`` after the job started or the job's deadline, whichever comes
first (and never past the call's own timeout). A policy still UNAVAILABLE then fails the call
as before: the job's typed UNAVAILABLE (503 with Retry-After at the gateway), or its best
answer so far when candidates exist.

What is retried, and why it is safe:

* a unary ``Generate`` answered UNAVAILABLE: nothing came back, so nothing was delivered to
  the client or counted in the job's usage. The policy may have decoded part of it before it
  went away ("Socket closed"); that work died with the process, and the retry is labelled
  ``broken`` (``refused`` when the connection was never made) so it shows in the metric;
* a ``GenerateStream`` that failed before its first chunk (:func:`stream`). A stream that has
  delivered a chunk is never retried: its text has reached the client and its tokens are
  accounted where the stream ended (``clients.py``), so a retry would duplicate both;
* a call answered CANCELLED, under the same two rules. A cancel of the worker's own surfaces
  as ``asyncio.CancelledError``, never as an answer, so a CANCELLED answer is the policy's: a
  server that begins its graceful stop cancels the calls it had accepted but not started
  (the short chaos run met it: a request sent as the policy was stopped failed "policy:
  CANCELLED" in 0.1 s).

Every retry calls ``on_retry(reason)``; the worker counts it in
``ttc_orchestrator_policy_retries_total``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

log = logging.getLogger(__name__)
T = TypeVar("T")

#: what a retry is counted as: the connection was refused, or it broke during the call
REFUSED, BROKEN = "refused", "broken"
#: the answers of a policy that is going away or not there yet (see the module docstring)
RETRIED = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED})


def reason_of(err: grpc.aio.AioRpcError) -> str:
    """``refused`` when the call never reached a server, else ``broken``."""
    details = (err.details() or "").lower()
    refused = ("connection refused", "failed to connect", "connect failed", "no connection")
    return REFUSED if any(text in details for text in refused) else BROKEN


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff: ``first_s``, doubling, at most ``cap_s``."""

    first_s: float = 0.1
    cap_s: float = 2.0

    def delay(self, attempt: int) -> float:
        return min(self.cap_s, self.first_s * 2.0**attempt)


class Attempts:
    """The retries of one call: each UNAVAILABLE waits a backoff step, unless the wait would end
    past ``until`` (a ``clock()`` time)."""

    def __init__(
        self,
        until: float,
        backoff: Backoff,
        on_retry: Callable[[str], None] | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._until = until
        self._backoff = backoff
        self._on_retry = on_retry
        self._clock = clock
        self._sleep = sleep
        self.count = 0

    async def again(self, err: grpc.aio.AioRpcError) -> bool:
        """Wait and return True when ``err`` is worth another attempt; False to give up."""
        if err.code() not in RETRIED:
            return False
        delay = self._backoff.delay(self.count)
        if self._clock() + delay >= self._until:
            return False
        reason = reason_of(err)
        if self.count == 0:
            log.info("policy unavailable; retrying with backoff", extra={"reason": reason, "error": err.details()})
        self.count += 1
        if self._on_retry is not None:
            self._on_retry(reason)
        await self._sleep(delay)
        return True


async def stream(open_call: Callable[[], AsyncIterator[T]], attempts: Attempts) -> AsyncGenerator[T, None]:
    """The chunks of a streaming call, reopened on UNAVAILABLE or CANCELLED only until its first chunk
    arrives; after that an error propagates (see the module docstring).

    Closed before its end (the caller's task cancelled while it handled a chunk, or the caller
    stopped reading), it cancels the open call at once. grpc.aio cancels a call itself only when
    the cancel lands inside a read; one that lands elsewhere left the call decoding on the
    engine until the garbage collector dropped it (CI saw the policy count no abort: tests/e2e/test_open_paths.py)."""
    while True:
        call = open_call()
        chunks = aiter(call)
        try:
            try:
                first = await anext(chunks)
            except StopAsyncIteration:
                return
            except grpc.aio.AioRpcError as err:
                if await attempts.again(err):
                    continue
                raise
            yield first
            async for chunk in chunks:
                yield chunk
            return
        finally:
            cancel_unfinished(call)


def cancel_unfinished(call: object) -> None:
    """Cancel a gRPC call that has not ended (a no-op for one that has, or for a plain iterator)."""
    done, cancel = getattr(call, "done", None), getattr(call, "cancel", None)
    if callable(done) and callable(cancel) and not done():
        cancel()
