"""One job's life on the gateway, written once: admit, follow, finish, cancel, count.

Chat/completions (``serving.py``) and the Responses API (``responses/service.py``) are two
renderers of a :class:`Session`; neither touches Redis nor the other. :meth:`Sessions.open`
takes the admission steps in order - the key's rate and token limits, the queue depth, the
plan, the token reservation, the enqueue. :meth:`Session.events` is the one loop over a job's
events: typed (:class:`Reasoning` - the model's tokens and the search's events as it runs -,
:class:`AnswerDelta`, then :class:`Finished` or :class:`TimedOut`), with the one deadline and
the one cancel of an abandoned job; the one place that times the first model token. The finish
(the record to format with, the usage, the gateway's token counters, the settlement of the
reservation) runs exactly once per session, for a waited, a streamed and a background job
alike: a background job is followed by the session itself until it finishes, so it is charged
like any other; a job the gateway cancelled is settled with what its worker spent, once known
(``cancel_settlement.py``). :class:`Outcome` is the one counter of requests by status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Any

from fastapi import Request
from opentelemetry import trace

from services.common.tracing import inject_context
from services.gateway.cancel_settlement import gateway_cancelled, settle_cancelled
from services.gateway.errors import HTTPError, to_error, too_many
from services.gateway.limits import Limiter, Reservation, budget_of
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan, Planner
from services.gateway.planning import Request as PlannedRequest
from services.gateway.session_events import AnswerDelta as AnswerDelta
from services.gateway.session_events import Event as Event
from services.gateway.session_events import Finished as Finished
from services.gateway.session_events import Reasoning as Reasoning
from services.gateway.session_events import TimedOut as TimedOut
from services.gateway.session_events import reasoning_of
from services.gateway.tracing import annotate_plan, annotate_usage, tracer
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.queue import JobQueue
from services.jobs.record import JobKind, JobRecord, MalformedJobRecord

log = logging.getLogger(__name__)

# A job has the job timeout to leave the queue (plus this); once a worker started it, until its
# worker deadline (from the start) plus RUN_GRACE_S, for the search to end with its best answer.
QUEUE_GRACE_S = 5.0
RUN_GRACE_S = 30.0


async def hung_up(http: Request) -> None:
    """Return once the client hangs up: the server's ``receive`` blocks until ``http.disconnect``
    once the body is read, so no polling. A ``receive`` that fails never reports a hang-up."""
    try:
        while (await http.receive())["type"] != "http.disconnect":
            pass
    except Exception:
        await asyncio.Event().wait()


class Outcome:
    """Counts one request in ``ttc_gateway_requests_total`` once, with the status it was answered:
    ``status`` as set by the renderer, or the error that left the block (a cancelled request is
    not counted)."""

    def __init__(self, metrics: GatewayMetrics, endpoint: str) -> None:
        self.metrics, self.endpoint = metrics, endpoint
        self.effort, self.strategy, self.status = "unknown", "unknown", "200"

    def of(self, session: Session) -> None:
        self.effort, self.strategy = session.plan.effort_applied, session.plan.job.strategy.name

    def __enter__(self) -> Outcome:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, asyncio.CancelledError):
            return
        if exc is not None:
            self.status = str(to_error(exc)[0]) if isinstance(exc, Exception) else "500"
        self.metrics.requests.labels(self.endpoint, self.effort, self.strategy, self.status).inc()


class Sessions:
    """Opens sessions and keeps the ones this gateway follows for clients that left (background)."""

    def __init__(
        self,
        planner: Planner,
        queue: JobQueue,
        limiter: Limiter,
        metrics: GatewayMetrics,
        job_timeout_s: float,
        retry_after_s: int = 2,
    ) -> None:
        self.planner, self.queue, self.limiter, self.metrics = planner, queue, limiter, metrics
        self.job_timeout_s, self.retry_after_s = job_timeout_s, retry_after_s
        self._admitting = 0
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stopping = False

    async def open(
        self,
        req: PlannedRequest,
        *,
        kind: JobKind,
        caller: str,
        include_usage: bool,
        stream: bool,
        background: bool,
        response: dict[str, Any] | None = None,
    ) -> Session:
        """Admit and enqueue one job: limits, queue depth, plan, token reservation, enqueue.

        ``stream``: the renderer streams the job's events; ``background``: its client does not
        wait for the end (a background job that is not streamed is followed here from the start).
        The search's reasoning is streamed unless the plan made the job quiet (the client opted out)."""
        started = time.perf_counter()
        await self.limiter.check(caller)
        # Requests this process admitted but has not yet put on the broker count as
        # waiting too: a burst must not all read the same short queue and be admitted.
        depth = await self.queue.depth() + self._admitting
        self.metrics.queue_depth.set(depth)
        self._admitting += 1
        try:
            plan = await self.planner.plan(req, depth, owner=caller)
            probe = plan.probe.prompt_tokens + plan.probe.generated_tokens if plan.probe else 0
            reservation = await self.limiter.reserve(caller, budget_of(plan.job, probe))
            record = plan.record(kind, caller, include_usage, background, response)
            try:
                await self._send(plan, record)
            except BaseException:
                await asyncio.shield(self.limiter.settle(reservation, probe))
                raise
        finally:
            self._admitting -= 1
        session = Session(
            self, plan, record, reservation, started, stream=stream, background=background, reasoning=not plan.job.quiet
        )
        if background and not stream:
            self.follow(session)
        return session

    async def _send(self, plan: Plan, record: JobRecord) -> None:
        """The enqueue, in its span: the job's message carries this span's context to the worker."""
        job = plan.job
        annotate_plan(
            job.model, record.effort_applied, record.effort_requested, record.strategy, job.job_id, job.max_tokens
        )
        with tracer.start_as_current_span("gateway/enqueue", kind=trace.SpanKind.PRODUCER) as span:
            span.set_attribute("messaging.destination.name", self.queue.queue)
            span.set_attribute("ttc.job_id", plan.job.job_id)
            await self.queue.enqueue(plan.job, record, inject_context())

    def follow(self, session: Session) -> None:
        """Follow ``session`` to its end in this process (a background job, a stream its client
        left): its finish charges the key and counts the tokens."""
        if not session.followed and not self._stopping:
            session.followed = True
            self.spawn(_drain(session))

    def spawn(self, work: Any) -> None:
        """Run ``work`` in the background until it ends or the gateway stops (then not at all)."""
        if self._stopping:
            work.close()
            return
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("a session's background work failed: %r", task.exception())

    async def aclose(self) -> None:
        """Stop following and settling (the gateway stops): an unfinished job, or a cancelled one
        whose worker's spend is not known yet, keeps its reservation."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ------------------------------------------------------------ any job, by id

    async def record(self, job_id: str) -> JobRecord | None:
        """The job's stored record, or None; a record that does not validate is a 500 naming its fields."""
        try:
            return await self.queue.record(job_id)
        except MalformedJobRecord as exc:
            log.error("%s", exc)
            raise HTTPError(500, str(exc), type="server_error", code="job_record_invalid") from exc

    async def result(self, job_id: str) -> orchestrator_pb2.SearchResult | None:
        return await self.queue.result(job_id)

    async def cancel(self, job_id: str, cause: str) -> None:
        """Cancel a job (its one result becomes the cancellation unless it has one), counted by cause."""
        if await self.queue.cancel(job_id, cause):
            self.metrics.cancellations.labels(cause).inc()

    def outcome(self, endpoint: str) -> Outcome:
        return Outcome(self.metrics, endpoint)


async def _drain(session: Session) -> None:
    async for _ in session.events():
        pass


class Session:
    """One admitted job, from its enqueue to its finish."""

    def __init__(
        self,
        sessions: Sessions,
        plan: Plan,
        record: JobRecord,
        reservation: Reservation | None,
        started: float,
        stream: bool,
        background: bool,
        reasoning: bool = True,
    ) -> None:
        self.sessions, self.plan, self.record, self.reservation = sessions, plan, record, reservation
        self.started, self.stream, self.background, self.reasoning = started, stream, background, reasoning
        self.job_id = plan.job.job_id
        timeout = sessions.job_timeout_s
        self._until = time.monotonic() + timeout + QUEUE_GRACE_S
        self._extended = False
        self._last = "0-0"  # the last event read: a follower that takes over resumes after it
        self._first = self._answered = False
        self._finished: Finished | None = None
        self._closed = False  # finished, cancelled or given up on
        self.followed = False  # the session follows itself to the end (``Sessions.follow``)
        self._settled = False  # the reservation's settlement is under way (``_settle``)

    async def events(self) -> AsyncGenerator[Event, None]:
        """The job's events as they come, ending with :class:`Finished` or :class:`TimedOut`.

        Reasoning comes only to a client that asked for it; a ``Progress`` event (a worker older
        than the reasoning stream) is read and dropped: its narration is not the model's text.
        A foreground job abandoned before its end (the consumer stops, or is cancelled when its
        client hangs up) is cancelled; a background one is followed on by the session."""
        try:
            while not self._closed:
                async for last, event in self.sessions.queue.follow(self.job_id, self._last, self._until):
                    self._last = last
                    which = event.WhichOneof("event")
                    if which == "reasoning" and self.reasoning:
                        for part in reasoning_of(event.reasoning):
                            if part.kind == "tokens":
                                self._saw(answer=False)
                            yield part
                    elif which == "answer_delta" and event.answer_delta:
                        self._saw(answer=True)
                        yield AnswerDelta(event.answer_delta)
                    elif which == "result":
                        yield await self.finish(event.result)
                        return
                if not await self._extend():
                    if not self.background:
                        await self.cancel("deadline")
                    self._closed = True
                    yield TimedOut(self.job_id, started=self._extended)
                    return
        finally:
            if not self._closed:
                if self.background:
                    self.sessions.follow(self)
                else:
                    await asyncio.shield(self.cancel("disconnect"))

    async def _extend(self) -> bool:
        """At the queue deadline: a started job gets until its worker's deadline plus grace (once)."""
        if self._extended:
            return False
        stored = await self.sessions.record(self.job_id)
        started = stored.started_at if stored is not None else None
        if started is None:
            return False
        self._extended = True
        left = max(0.0, started + self.sessions.job_timeout_s - time.time())
        self._until = time.monotonic() + left + RUN_GRACE_S
        return True

    def _saw(self, answer: bool) -> None:
        """Streamed timing: the first model token the client sees (reasoning tokens or the
        answer; never an event line the search wrote), and the first token of the answer itself."""
        metrics, elapsed = self.sessions.metrics, time.perf_counter() - self.started
        if self.stream and not self._first:
            self._first = True
            metrics.ttft.labels("true").observe(elapsed)
        if self.stream and answer and not self._answered:
            self._answered = True
            metrics.ttfat.observe(elapsed)

    async def wait(self, http: Request) -> Finished:
        """The finished job, for a client that waits: its hang-up cancels the job (499); the
        deadline is 429 ``overloaded`` for a job that never left the queue, else 504."""
        task = asyncio.create_task(self._end())
        watcher = asyncio.create_task(hung_up(http))
        try:
            done, _ = await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if task not in done:
                await asyncio.shield(self.cancel("disconnect"))
                raise HTTPError(499, "client disconnected", code="client_closed")
            end = task.result()
            if isinstance(end, Finished):
                return end
            if not end.started:  # never left the queue: overload, shed late
                raise too_many(
                    f"job {self.job_id} waited {self.sessions.job_timeout_s:g}s in the queue without a worker; "
                    "retry later",
                    self.sessions.retry_after_s,
                    "overloaded",
                )
            raise HTTPError(504, f"job {self.job_id} timed out", type="server_error", code="deadline_exceeded")
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _end(self) -> Finished | TimedOut:
        async with contextlib.aclosing(self.events()) as events:
            async for event in events:
                if isinstance(event, Finished | TimedOut):
                    return event
        raise RuntimeError("the job's events ended without a result")

    async def finish(self, result: orchestrator_pb2.SearchResult) -> Finished:
        """The job's end, once: the reply's record and usage, the token counters, the settlement."""
        if self._finished is not None:
            return self._finished
        self._closed = True
        record = await self._final_record(result)
        usage = usage_of(result, record)
        annotate_usage(usage.prompt_tokens, usage.completion_tokens)  # the request's span, while it lasts
        metrics = self.sessions.metrics
        metrics.reasoning_tokens.labels(record.effort_applied).inc(usage.completion_tokens_details.reasoning_tokens)
        metrics.completion_tokens.labels(record.effort_applied).inc(usage.completion_tokens)
        elapsed = time.perf_counter() - self.started
        if not self.stream and not self.background:
            metrics.ttft.labels("false").observe(elapsed)
        if self.stream and not self._answered and (result.answer or result.tool_calls):
            self._answered = True
            metrics.ttfat.observe(elapsed)
        if self.stream and not self._first:
            self._first = True
            metrics.ttft.labels("true").observe(elapsed)
        wait = record.queue_wait()
        if wait is not None:
            metrics.queue_wait.observe(wait)
        self._settle(None if gateway_cancelled(result) else usage.total_tokens)
        self._finished = Finished(result, record, usage)
        return self._finished

    async def _final_record(self, result: orchestrator_pb2.SearchResult) -> JobRecord:
        """The record to format the reply with: the one written at enqueue plus the worker's start
        (``SearchResult.started_at``) and the finish, or read back from Redis when the result lacks
        the start (a worker that predates the field, a failure before the search started)."""
        if result.started_at:
            update = {
                "started_at": result.started_at,
                "enqueued_at": self.record.enqueued_at or self.plan.job.enqueued_at or None,
                "finished_at": time.time(),
            }
            return self.record.model_copy(update=update)
        return await self.sessions.record(self.job_id) or self.record

    async def cancel(self, cause: str) -> None:
        """Cancel this job (once); its reservation is settled once its worker's spend is known."""
        if self._closed:
            return
        self._closed = True
        await self.sessions.cancel(self.job_id, cause)
        self._settle(None)

    def _settle(self, used: int | None) -> None:
        """Replace the token reservation, once, in the background: by ``used`` tokens, or (None,
        a cancellation the gateway recorded) by what the job's worker spent, when that is known
        (the rule: ``cancel_settlement.py``)."""
        if self._settled or self.reservation is None:
            return
        self._settled, sessions, held = True, self.sessions, self.reservation
        runs_for = sessions.job_timeout_s + RUN_GRACE_S  # a started job's worker is done by then
        sessions.spawn(
            settle_cancelled(sessions.limiter, held, sessions.queue, self.job_id, self.record, runs_for)
            if used is None
            else sessions.limiter.settle(held, used)
        )
