"""What a job the gateway cancelled really spent, for the token limit's settlement.

When the gateway records a job's cancellation itself (its client hung up, the gateway's
deadline, an API cancel), that result is the job's one result and says nothing of what a worker
decoded. The worker, once its search stops, keeps its spend beside it (``ttc:job:<id>:spent``,
``JobEvents.record_spent``), and ``JobEvents.result`` merges the two. So the session does not
settle at the cancel: it spawns :func:`settle_cancelled`, which finds the account to charge by
the one rule below, then replaces the key's reservation by it.

The rule (:func:`account_after_cancel`), once the cancellation is recorded:

1. The job's result is a worker's own account (a finish, a failure, or a cancellation with its
   spend merged in: anything but :func:`gateway_cancelled`): charge it. This covers a worker
   that finished just before the cancel, too.
2. Else, the job's record has no ``started_at``: no worker started it, and none ever will. A
   worker's start (``JobEvents.start``) is one Lua script that checks for a result and marks the
   record ``running`` with ``started_at`` atomically, and the cancellation's result is already
   stored, so a worker that picks the job up as it is cancelled either started before (and has
   ``started_at``) or sees the result and skips it. Charge the gateway's cancellation: no search
   spend, the difficulty probe only, so the rest of the reservation is released.
3. Else a worker started it: wait for its spend to arrive (polling, with backoff) until its
   deadline - ``started_at`` plus ``runs_for_s`` (the session's: the job timeout plus its run
   grace), past which no worker runs it - and charge it as in 1.
4. Nothing by then (a worker that died, or failed after the cancel and so kept no spend):
   the reservation stands. What it spent is unknown, and the reservation is what it may spend.

It runs in the background (``Sessions.spawn``), never in the reply's way; the session calls it
at most once per reservation, and the gateway's shutdown cancels it (the reservation stands).
"""

from __future__ import annotations

import asyncio
import logging
import time

from services.gateway.limits import Limiter, Reservation
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.queue import JobQueue
from services.jobs.record import JobRecord

log = logging.getLogger(__name__)

# Polls for a started job's spend: the first soon (a worker stops within its cancel poll), then
# doubling up to the last, so a slow worker costs one Redis round trip every few seconds.
FIRST_POLL_S = 0.2
LAST_POLL_S = 3.0


def gateway_cancelled(result: orchestrator_pb2.SearchResult) -> bool:
    """A cancellation the gateway recorded and no worker's spend has been merged into
    (``with_spend`` fills in ``started_at``): it cannot be charged as it is."""
    return result.termination == orchestrator_pb2.TERMINATION_CANCELLED and not result.started_at


async def account_after_cancel(
    queue: JobQueue,
    job_id: str,
    runs_for_s: float,
    first_poll_s: float = FIRST_POLL_S,
    last_poll_s: float = LAST_POLL_S,
) -> orchestrator_pb2.SearchResult | None:
    """The result to charge a cancelled job by (the module's rule), or None when its worker's
    spend did not arrive within ``runs_for_s`` of its start. Call it only once the job has a
    result (the cancellation is recorded), or a job no worker started yet reads as spent-nothing."""
    deadline: float | None = None
    poll = first_poll_s
    while True:
        result = await queue.result(job_id)
        if result is not None and not gateway_cancelled(result):
            return result
        if deadline is None:
            stored = await queue.record(job_id)
            started = stored.started_at if stored is not None else None
            if not started:
                return result or orchestrator_pb2.SearchResult(job_id=job_id)
            deadline = started + runs_for_s
        left = deadline - time.time()
        if left <= 0:
            return None
        await asyncio.sleep(min(poll, left))
        poll = min(2 * poll, last_poll_s)


async def settle_cancelled(
    limiter: Limiter,
    reservation: Reservation,
    queue: JobQueue,
    job_id: str,
    record: JobRecord,
    runs_for_s: float,
    first_poll_s: float = FIRST_POLL_S,
) -> None:
    """Replace ``reservation`` by what the cancelled job spent (``record``, the one written at
    enqueue, adds the probe), once that is known; leave it standing when it never is."""
    account = await account_after_cancel(queue, job_id, runs_for_s, first_poll_s)
    if account is None:
        log.info("job %s: its worker's spend never arrived; its token reservation stands", job_id)
        return
    await limiter.settle(reservation, usage_of(account, record).total_tokens)
