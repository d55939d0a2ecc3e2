"""Chat and legacy completions as one renderer of a job session (``session.py``): a waited
reply, an SSE stream (``streaming.py``) or a background job id, and the background job API.

Routers call these methods and return what they return; every failure is raised and formatted
by the one mapper in ``errors.py``. The session admits, follows, finishes and cancels the job;
here it is only turned into OpenAI's shapes (``formatting.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.gateway.errors import HTTPError, to_error
from services.gateway.formatting import raise_for_failure, response_of
from services.gateway.protocol import ChatCompletionRequest, CompletionRequest, ErrorDetail, ErrorResponse, Job
from services.gateway.session import AnswerDelta, Finished, Reasoning, Session, Sessions, TimedOut
from services.gateway.streaming import DONE, Chunks, sse
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobKind


class Serving:
    def __init__(self, sessions: Sessions) -> None:
        self.sessions = sessions

    # ------------------------------------------------------------ entry points

    async def complete(
        self, req: ChatCompletionRequest | CompletionRequest, caller: str, http: Request
    ) -> JSONResponse | StreamingResponse:
        endpoint = "chat" if isinstance(req, ChatCompletionRequest) else "completions"
        kind: JobKind = "chat.completion" if endpoint == "chat" else "text_completion"
        with self.sessions.outcome(endpoint) as outcome:
            session = await self.sessions.open(
                req,
                kind=kind,
                caller=caller,
                include_usage=bool(req.stream_options and req.stream_options.include_usage),
                stream=bool(req.stream) and not req.background,
                background=req.background,
            )
            outcome.of(session)
            job = session.plan.job
            if req.background:
                outcome.status = "202"
                queued = Job(id=job.job_id, status="queued", created_at=job.enqueued_at, model=req.model, kind=kind)
                return JSONResponse(status_code=202, content=queued.model_dump(exclude_none=True))
            if req.stream:
                stream = self._stream(session, endpoint)
                return StreamingResponse(stream, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            end = await session.wait(http)
            raise_for_failure(end.result)
            return JSONResponse(content=response_of(end.result, end.record).model_dump(exclude_none=True))

    async def job(self, job_id: str, caller: str | None = None) -> Job:
        """A background job's status, with its response once finished (only its owner's key sees it)."""
        record = await self.sessions.record(job_id)
        if record is None or (caller is not None and record.caller is not None and record.caller != caller):
            raise HTTPError(
                404, f"no job with id {job_id!r} (unknown or expired)", param="job_id", code="job_not_found"
            )
        result = await self.sessions.result(job_id)
        job = Job(id=job_id, status=record.status, created_at=record.created_at, model=record.model, kind=record.kind)
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
            result = await self.sessions.result(job_id)
            assert result is not None
            raise_for_failure(result)
        raise HTTPError(
            409, f"job {job_id} has not finished (status: {job.status})", param="job_id", code="job_not_finished"
        )

    async def cancel(self, job_id: str, caller: str | None = None, cause: str = "api") -> Job:
        await self.job(job_id, caller)  # 404 for unknown jobs and other keys' jobs
        await self.sessions.cancel(job_id, cause)
        return await self.job(job_id, caller)

    # ------------------------------------------------------------ the stream

    async def _stream(self, session: Session, endpoint: str) -> AsyncIterator[bytes]:
        """SSE (``streaming.py``): role chunk, the search's reasoning as it runs (labelled
        ``reasoning_content``), answer deltas as they arrive, tool calls, other choices, logprobs,
        finish, usage, [DONE]."""
        job = session.plan.job
        chunks = Chunks(endpoint, job.job_id, job.model, int(job.enqueued_at))
        streamed = ""
        yield chunks.role()
        async for event in session.events():
            if isinstance(event, Reasoning):
                piece = chunks.reasoning(event.source, event.kind, event.text)
                if piece is not None:
                    yield piece
            elif isinstance(event, AnswerDelta):
                streamed += event.text
                yield chunks.content(event.text)
            elif isinstance(event, Finished):
                try:
                    raise_for_failure(event.result)
                except Exception as exc:
                    yield sse(ErrorResponse(error=to_error(exc)[1]).model_dump())
                    break
                yield b"".join(chunks.ending(event.result, event.record, streamed, session.reasoning))
            elif isinstance(event, TimedOut):
                message = f"job {event.job_id} did not finish within its deadline"
                yield sse(
                    ErrorResponse(error=ErrorDetail(message=message, type="server_error", code="timeout")).model_dump()
                )
        yield DONE
