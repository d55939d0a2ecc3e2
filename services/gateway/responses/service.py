"""The Responses API's lifecycle: create (wait, stream or background), retrieve, cancel, delete.

Creation converts the request into the chat request (``convert``) and hands it to
``Serving.submit``: the same rate limit, planning, admission and queue as chat completions,
and one job record (kind ``response``) in the one job store. Waiting and cancelling reuse
``Serving``'s (a client that hangs up on a foreground response cancels its search).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.common.errors import InvalidArgument
from services.gateway.errors import HTTPError, to_error
from services.gateway.formatting import raise_for_failure
from services.gateway.planning import Plan
from services.gateway.responses import render
from services.gateway.responses.convert import Item, item_dicts, parse_items, renamed, to_chat
from services.gateway.responses.objects import DeletedResponse, FunctionCallOutput, MessageOutput, ResponseObject
from services.gateway.responses.request import ResponseCreateRequest
from services.gateway.responses.store import ResponseStore, StoredResponse
from services.gateway.responses.stream import ResponseEvents
from services.gateway.serving import Serving
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord

log = logging.getLogger(__name__)

ENDPOINT = "responses"
# Request fields the response object echoes back (as OpenAI's does).
ECHOED = (
    "instructions",
    "metadata",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "tool_choice",
    "tools",
    "text",
    "reasoning",
    "max_output_tokens",
    "previous_response_id",
    "background",
    "store",
    "truncation",
    "service_tier",
    "user",
    "prompt_cache_key",
    "safety_identifier",
)


def echo_of(req: ResponseCreateRequest) -> dict[str, Any]:
    data = req.model_dump(mode="json", include=set(ECHOED), exclude_none=True, by_alias=True)
    data.setdefault("tool_choice", "auto")
    data.setdefault("parallel_tool_calls", True)
    data.setdefault("text", {"format": {"type": "text"}})
    return data


def output_as_input(obj: ResponseObject) -> list[dict[str, Any]]:
    """A finished response's output as the input items a follow-up continues from."""
    items: list[dict[str, Any]] = []
    for item in obj.output:
        if isinstance(item, MessageOutput):
            parts = [{"type": "output_text", "text": c.text} for c in item.content]
            items.append({"type": "message", "role": "assistant", "content": parts})
        elif isinstance(item, FunctionCallOutput):
            items.append(
                {"type": "function_call", "call_id": item.call_id, "name": item.name, "arguments": item.arguments}
            )
    return items


def not_found(response_id: str, param: str = "response_id") -> HTTPError:
    return HTTPError(
        404,
        f"no response with id {response_id!r} (unknown, expired or deleted)",
        param=param,
        code="response_not_found",
    )


class ResponsesService:
    def __init__(self, serving: Serving, store: ResponseStore) -> None:
        self.serving = serving
        self.store = store

    # ------------------------------------------------------------ create

    async def create(self, req: ResponseCreateRequest, caller: str, http: Request) -> JSONResponse | StreamingResponse:
        started = time.perf_counter()
        effort, strategy = "unknown", "unknown"
        try:
            history = await self._history(req.previous_response_id, caller) if req.previous_response_id else []
            chat, conversion = to_chat(req, history)
            echo = echo_of(req)
            background, stream = bool(req.background), bool(req.stream)

            def record_of(plan: Plan) -> JobRecord:
                plan.job.stream_answer = stream
                record = plan.record("response", caller, True, background)
                return record.model_copy(update={"response": echo})

            try:
                plan, record = await self.serving.submit(chat, caller, record_of)
            except InvalidArgument as err:
                raise renamed(err, conversion) from None
            effort, strategy = plan.effort_applied, plan.route.strategy
            job_id = plan.job.job_id
            if req.store is not False:
                await self.store.put(job_id, StoredResponse(caller=caller, input=item_dicts([*history, *req.items()])))
            if stream:
                self._count(effort, strategy, "200")
                events = self._stream(plan, record, caller, started, background)
                return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            if background:
                self._count(effort, strategy, "200")
                return JSONResponse(content=_json(render.pending(job_id, record)))
            result = await self.serving._wait(job_id, http)
            record = await self.serving.dispatcher.record(job_id) or record
            self.serving._observe(result, record, caller, time.perf_counter() - started, stream=False)
            obj = render.finished(job_id, result, record)
            await self._keep(job_id, obj)
            if obj.status == "failed":
                raise_for_failure(result)
            self._count(effort, strategy, "200")
            return JSONResponse(content=_json(obj))
        except BaseException as exc:
            if not isinstance(exc, asyncio.CancelledError):
                status, _, _ = to_error(exc) if isinstance(exc, Exception) else (500, None, None)
                self._count(effort, strategy, str(status))
            raise

    def _count(self, effort: str, strategy: str, status: str) -> None:
        self.serving.metrics.requests.labels(ENDPOINT, effort, strategy, status).inc()

    async def _history(self, previous_id: str, caller: str) -> list[Item]:
        """The stored conversation ``previous_response_id`` continues: its input, then its output."""
        try:
            previous = await self.retrieve(previous_id, caller)
        except HTTPError:
            raise InvalidArgument(
                f"previous response {previous_id!r} not found (unknown, expired, deleted or stored with store: false)",
                field="previous_response_id",
            ) from None
        job_id = render.job_id_of(previous_id)
        entry = await self.store.get(job_id) if job_id else None
        if entry is None:
            raise InvalidArgument(
                f"previous response {previous_id!r} was not stored (store: false)", field="previous_response_id"
            )
        if previous.status in ("queued", "in_progress"):
            raise InvalidArgument(f"previous response {previous_id!r} has not finished", field="previous_response_id")
        return parse_items([*entry.input, *output_as_input(previous)])

    async def _stream(
        self, plan: Plan, record: JobRecord, caller: str, started: float, background: bool
    ) -> AsyncIterator[bytes]:
        job_id = plan.job.job_id
        events = ResponseEvents(job_id)
        finished = False
        try:
            shell = render.pending(job_id, record).model_copy(update={"status": "in_progress"})
            yield events.lifecycle("response.created", shell)
            yield events.lifecycle("response.in_progress", shell)
            line = f"Routed to {plan.route.strategy} (n={plan.route.n}) at effort {plan.effort_applied}.\n"
            for chunk in events.reasoning_delta(line):
                yield chunk
            until = time.monotonic() + 2 * self.serving.job_timeout_s + 30
            first = first_answer = False
            async for _, event in self.serving.dispatcher.follow(job_id, until=until):
                which = event.WhichOneof("event")
                out: list[bytes] = []
                if which == "progress" and event.progress.message:
                    out = events.reasoning_delta(event.progress.message + "\n")
                elif which == "answer_delta" and event.answer_delta:
                    out = events.text_delta(event.answer_delta)
                    if not first_answer:
                        first_answer = True
                        self.serving.metrics.ttfat.observe(time.perf_counter() - started)
                elif which == "result":
                    finished = True
                    out = await self._finish(job_id, event.result, record, caller, started, events)
                for chunk in out:
                    yield chunk
                if out and not first:
                    first = True
                    self.serving.metrics.ttft.labels("true").observe(time.perf_counter() - started)
                if finished:
                    break
            if not finished:
                finished = True
                if not background:
                    await asyncio.shield(self.serving._cancel(job_id, "deadline"))
                yield events.event(
                    "error", code="timeout", message=f"response {job_id} did not finish within its deadline", param=None
                )
        finally:
            if not finished and not background:
                await asyncio.shield(self.serving._cancel(job_id, "disconnect"))

    async def _finish(
        self,
        job_id: str,
        result: orchestrator_pb2.SearchResult,
        record: JobRecord,
        caller: str,
        started: float,
        events: ResponseEvents,
    ) -> list[bytes]:
        record = await self.serving.dispatcher.record(job_id) or record
        self.serving._observe(result, record, caller, time.perf_counter() - started, stream=True)
        obj = render.finished(job_id, result, record, summary=events.reasoning_text)
        await self._keep(job_id, obj)
        return events.finish(obj)

    async def _keep(self, job_id: str, obj: ResponseObject) -> None:
        """Store the final object with its conversation (only for stored, undeleted responses)."""
        entry = await self.store.get(job_id)
        if entry is None or entry.deleted or entry.response is not None:
            return
        entry.response = obj.model_dump(mode="json")
        await self.store.put(job_id, entry)

    # ------------------------------------------------------------ retrieve, cancel, delete

    async def retrieve(self, response_id: str, caller: str | None) -> ResponseObject:
        """The response as it stands; 404 for unknown, expired, deleted ids and other keys' ids."""
        job_id = render.job_id_of(response_id)
        if job_id is None:
            raise not_found(response_id)
        entry = await self.store.get(job_id)
        if entry is not None and (entry.deleted or not entry.visible_to(caller)):
            raise not_found(response_id)
        if entry is not None and entry.response is not None:
            return ResponseObject.model_validate(entry.response)
        record = await self.serving.dispatcher.record(job_id)
        if record is None or record.kind != "response" or (caller is not None and record.caller not in (None, caller)):
            raise not_found(response_id)
        if entry is None and not record.background and (record.response or {}).get("store") is False:
            raise not_found(response_id)  # store: false keeps nothing; only a background job is followed
        result = await self.serving.dispatcher.result(job_id)
        if result is None:
            return render.pending(job_id, record)
        obj = render.finished(job_id, result, record)
        await self._keep(job_id, obj)
        return obj

    async def cancel(self, response_id: str, caller: str | None) -> ResponseObject:
        """Stop an unfinished response's search (the job's cancellation path); a finished one is returned as is."""
        obj = await self.retrieve(response_id, caller)
        if obj.status in ("queued", "in_progress"):
            job_id = render.job_id_of(response_id)
            assert job_id is not None
            await self.serving._cancel(job_id, "api")
            obj = await self.retrieve(response_id, caller)
        return obj

    async def delete(self, response_id: str, caller: str | None) -> DeletedResponse:
        """Forget a response (cancelling it first if it still runs); its id answers 404 afterwards."""
        obj = await self.cancel(response_id, caller)
        job_id = render.job_id_of(obj.id)
        assert job_id is not None
        entry = await self.store.get(job_id)
        record = await self.serving.dispatcher.record(job_id)
        owner = entry.caller if entry is not None else record.caller if record is not None else caller
        await self.store.delete(job_id, owner)
        return DeletedResponse(id=obj.id)


def _json(obj: ResponseObject) -> dict[str, Any]:
    return obj.model_dump(mode="json")
