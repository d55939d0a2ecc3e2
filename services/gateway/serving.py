"""Serving the completion endpoints: plan → enqueue → wait, stream or hand back a job id.

Routers call these methods and return what they return; every failure is raised and
formatted by the one mapper in ``errors.py``. A request that is abandoned - a streaming
client that disconnects, a waiting client that hangs up - cancels its job, which cancels the
worker's search and, through gRPC cancellation, the engine request behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.gateway.dispatch import Dispatcher
from services.gateway.errors import HTTPError, to_error, too_many
from services.gateway.formatting import raise_for_failure, response_of, usage_of
from services.gateway.limits import Limiter
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan, Planner
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest, ErrorDetail, ErrorResponse, Job
from services.gateway.streaming import DONE, Chunks, sse
from services.gateway.tracing import annotate_usage
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from services.jobs.errors import JobError
from services.jobs.record import JobKind, JobRecord

log = logging.getLogger(__name__)


async def hung_up(http: Request) -> None:
    """Return once the client hangs up: the server's ``receive`` blocks until ``http.disconnect``
    once the body is read, so no polling. A ``receive`` that fails never reports a hang-up."""
    try:
        while (await http.receive())["type"] != "http.disconnect":
            pass
    except Exception:
        await asyncio.Event().wait()


class Serving:
    def __init__(
        self,
        planner: Planner,
        dispatcher: Dispatcher,
        limiter: Limiter,
        metrics: GatewayMetrics,
        job_timeout_s: float,
        retry_after_s: int = 2,
    ) -> None:
        self.retry_after_s = retry_after_s
        self._admitting = 0
        self.planner = planner
        self.dispatcher = dispatcher
        self.limiter = limiter
        self.metrics = metrics
        self.job_timeout_s = job_timeout_s

    # ------------------------------------------------------------ entry points

    async def complete(
        self, req: ChatCompletionRequest | CompletionRequest, caller: str, http: Request
    ) -> JSONResponse | StreamingResponse:
        started = time.perf_counter()
        endpoint = "chat" if isinstance(req, ChatCompletionRequest) else "completions"
        kind: JobKind = "chat.completion" if endpoint == "chat" else "text_completion"
        effort, strategy = "unknown", "unknown"
        try:
            include_usage = bool(req.stream_options and req.stream_options.include_usage)

            def record_of(plan: Plan) -> JobRecord:
                # A waiting request reads only the result: no progress events to publish.
                plan.job.quiet = not req.stream and not req.background
                return plan.record(kind, caller, include_usage, req.background)

            plan, record = await self.submit(req, caller, record_of)
            effort, strategy = plan.effort_applied, plan.job.strategy.name
            if req.background:
                self.metrics.requests.labels(endpoint, effort, strategy, "202").inc()
                job = Job(
                    id=plan.job.job_id, status="queued", created_at=plan.job.enqueued_at, model=req.model, kind=kind
                )
                return JSONResponse(status_code=202, content=job.model_dump(exclude_none=True))
            if req.stream:
                self.metrics.requests.labels(endpoint, effort, strategy, "200").inc()
                stream = self._stream(plan, record, caller, endpoint, started)
                return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            result = await self._wait(plan.job.job_id, http)
            record = await self._final_record(plan, result, record)
            self._observe(result, record, caller, time.perf_counter() - started, stream=False)
            raise_for_failure(result)
            body = response_of(result, record)
            self.metrics.requests.labels(endpoint, effort, strategy, "200").inc()
            return JSONResponse(content=body.model_dump(exclude_none=True))
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                status, _, _ = to_error(exc) if isinstance(exc, Exception) else (500, None, None)
                self.metrics.requests.labels(endpoint, effort, strategy, str(status)).inc()
            raise

    async def submit(
        self, req: ChatCompletionRequest | CompletionRequest, caller: str, record_of: Callable[[Plan], JobRecord]
    ) -> tuple[Plan, JobRecord]:
        """Rate limit, plan and enqueue one job (``record_of`` builds its record); the Responses API reuses it."""
        await self.limiter.check(caller)
        # Requests this process admitted but has not yet put on the broker count as
        # waiting too: a burst must not all read the same short queue and be admitted.
        depth = await self.dispatcher.queue_depth() + self._admitting
        self.metrics.queue_depth.set(depth)
        self._admitting += 1
        try:
            plan = await self.planner.plan(req, depth)
            record = record_of(plan)
            await self.dispatcher.enqueue(plan.job, record)
        finally:
            self._admitting -= 1
        return plan, record

    async def job(self, job_id: str, caller: str | None = None) -> Job:
        """A background job's status, with its response once finished (only its owner's key sees it)."""
        record = await self.dispatcher.record(job_id)
        if record is None or (caller is not None and record.caller is not None and record.caller != caller):
            raise HTTPError(
                404, f"no job with id {job_id!r} (unknown or expired)", param="job_id", code="job_not_found"
            )
        result = await self.dispatcher.result(job_id)
        job = Job(
            id=job_id,
            status=record.status,
            created_at=record.created_at,
            model=record.model,
            kind=record.kind,
        )
        if result is None:
            return job
        try:
            raise_for_failure(result)
            job.result = response_of(result, record)
            job.status = "succeeded"
        except Exception as exc:
            _, detail, _ = to_error(exc)
            job.error = detail
            job.status = "cancelled" if result.termination == orchestrator_pb2.TERMINATION_CANCELLED else "failed"
        return job

    async def job_result(self, job_id: str, caller: str | None = None) -> JSONResponse:
        """The finished job's OpenAI response (or its error); 409 while it still runs."""
        job = await self.job(job_id, caller)
        if job.result is not None:
            return JSONResponse(content=job.result.model_dump(exclude_none=True))
        if job.error is not None:
            result = await self.dispatcher.result(job_id)
            assert result is not None
            raise_for_failure(result)
        raise HTTPError(
            409, f"job {job_id} has not finished (status: {job.status})", param="job_id", code="job_not_finished"
        )

    async def cancel(self, job_id: str, caller: str | None = None, cause: str = "api") -> Job:
        await self.job(job_id, caller)  # 404 for unknown jobs and other keys' jobs
        await self._cancel(job_id, cause)
        return await self.job(job_id, caller)

    # ------------------------------------------------------------ internals

    async def _final_record(self, plan: Plan, result: orchestrator_pb2.SearchResult, record: JobRecord) -> JobRecord:
        """The record to format the reply with: the one written at enqueue plus the worker's
        start (``SearchResult.started_at``), or read back from Redis when the result lacks it
        (a worker that predates the field, a failure before the search started)."""
        if result.started_at:
            enqueued = record.enqueued_at or plan.job.enqueued_at or None
            return record.model_copy(update={"started_at": result.started_at, "enqueued_at": enqueued})
        return await self.dispatcher.record(plan.job.job_id) or record

    async def _cancel(self, job_id: str, cause: str) -> None:
        """Record the cancellation as the job's one result (unless it has one), then stop the worker."""
        result = orchestrator_pb2.SearchResult(
            job_id=job_id,
            termination=orchestrator_pb2.TERMINATION_CANCELLED,
            error=JobError("CANCELLED", f"cancelled ({cause})").to_json(),
        )
        recorded = await self.dispatcher.events.record_result(result, ev.CANCELLED)
        await self.dispatcher.cancel(job_id)
        if recorded:
            self.metrics.cancellations.labels(cause).inc()

    async def _wait(self, job_id: str, http: Request) -> orchestrator_pb2.SearchResult:
        """Wait for the result; cancel the job if the client hangs up or the deadline passes."""

        async def until_result() -> orchestrator_pb2.SearchResult:
            async for _, event in self.dispatcher.follow(job_id):
                if event.HasField("result"):
                    return event.result
            raise RuntimeError("event stream ended without a result")

        task = asyncio.create_task(until_result())
        watcher = asyncio.create_task(hung_up(http))
        deadline = time.monotonic() + self.job_timeout_s + 5
        extended = False
        try:
            while True:
                timeout = max(0.0, deadline - time.monotonic())
                done, _ = await asyncio.wait({task, watcher}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    return task.result()
                if watcher in done:
                    await asyncio.shield(self._cancel(job_id, "disconnect"))
                    raise HTTPError(499, "client disconnected", code="client_closed")
                if time.monotonic() > deadline:
                    stored = await self.dispatcher.record(job_id)
                    started = stored.started_at if stored is not None else None
                    if started is not None and not extended:
                        # Running: the worker's own deadline (from its start) ends the search
                        # with the best answer so far; give it that long plus a grace period.
                        extended = True
                        deadline = time.monotonic() + max(0.0, started + self.job_timeout_s - time.time()) + 30
                        continue
                    await asyncio.shield(self._cancel(job_id, "deadline"))
                    if started is None:  # never left the queue: overload, shed late
                        raise too_many(
                            f"job {job_id} waited {self.job_timeout_s:g}s in the queue without a worker; retry later",
                            self.retry_after_s,
                            "overloaded",
                        )
                    raise HTTPError(504, f"job {job_id} timed out", type="server_error", code="deadline_exceeded")
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def _stream(
        self, plan: Plan, record: JobRecord, caller: str, endpoint: str, started: float
    ) -> AsyncIterator[bytes]:
        """SSE (``streaming.py``): role chunk, reasoning_content progress, answer deltas as they
        arrive, tool calls, other choices, logprobs, finish, usage, [DONE]. Time to the first
        event of any kind and time to the first answer token are measured apart."""
        job_id = plan.job.job_id
        chunks = Chunks(endpoint, job_id, plan.job.model, int(plan.job.enqueued_at))
        finished = False
        first_event = False
        streamed = ""
        try:
            yield chunks.role()
            # Queue wait plus the worker's own deadline plus grace: a stream never hangs.
            until = time.monotonic() + 2 * self.job_timeout_s + 30
            async for _, event in self.dispatcher.follow(job_id, until=until):
                which = event.WhichOneof("event")
                if not first_event and which in ("progress", "answer_delta"):
                    first_event = True
                    self.metrics.ttft.labels("true").observe(time.perf_counter() - started)
                if which == "progress" and event.progress.message:
                    line = chunks.progress(event.progress.message)
                    if line is not None:
                        yield line
                elif which == "answer_delta" and event.answer_delta:
                    if not streamed:
                        self.metrics.ttfat.observe(time.perf_counter() - started)
                    streamed += event.answer_delta
                    yield chunks.content(event.answer_delta)
                elif which == "result":
                    finished = True
                    result = event.result
                    record = await self._final_record(plan, result, record)
                    self._observe(result, record, caller, time.perf_counter() - started, stream=True)
                    try:
                        raise_for_failure(result)
                    except Exception as exc:
                        _, detail, _ = to_error(exc)
                        yield sse(ErrorResponse(error=detail).model_dump())
                        break
                    if not streamed and (result.answer or result.tool_calls):
                        self.metrics.ttfat.observe(time.perf_counter() - started)
                    for piece in chunks.ending(result, record, streamed):
                        yield piece
                    break
            if not finished:
                await asyncio.shield(self._cancel(job_id, "deadline"))
                finished = True
                message = f"job {job_id} did not finish within its deadline"
                yield sse(
                    ErrorResponse(error=ErrorDetail(message=message, type="server_error", code="timeout")).model_dump()
                )
            yield DONE
        finally:
            if not finished:
                await asyncio.shield(self._cancel(job_id, "disconnect"))

    def _observe(
        self, result: orchestrator_pb2.SearchResult, record: JobRecord, caller: str, elapsed: float, stream: bool
    ) -> None:
        usage = usage_of(result, record)
        annotate_usage(usage.prompt_tokens, usage.completion_tokens)  # gen_ai.usage.* on the request's span
        effort = record.effort_applied
        self.metrics.reasoning_tokens.labels(effort).inc(usage.completion_tokens_details.reasoning_tokens)
        self.metrics.completion_tokens.labels(effort).inc(usage.completion_tokens)
        if not stream:
            self.metrics.ttft.labels("false").observe(elapsed)
        wait = record.queue_wait()
        if wait is not None:
            self.metrics.queue_wait.observe(wait)
        task = asyncio.get_running_loop().create_task(self.limiter.charge(caller, usage.total_tokens))
        task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)


Handler = Callable[..., Awaitable[Any]]
__all__ = ["ErrorDetail", "Serving"]
