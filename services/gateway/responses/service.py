"""The Responses API's lifecycle: create (wait, stream or background), retrieve, cancel, delete.

Creation converts the request into the chat request (``convert``) and opens a job session on
it (``session.py``): the same limits, planning, admission, queue, finish and charging as chat
completions, and one job record (kind ``response``) in the one job store. This module only
renders the session's events as the Responses API's objects and events.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from services.common.errors import InvalidArgument
from services.gateway.errors import HTTPError
from services.gateway.formatting import raise_for_failure
from services.gateway.responses import render
from services.gateway.responses.convert import Item, item_dicts, parse_items, renamed, to_chat
from services.gateway.responses.objects import DeletedResponse, FunctionCallOutput, MessageOutput, ResponseObject
from services.gateway.responses.request import ResponseCreateRequest
from services.gateway.responses.store import ResponseStore, StoredResponse
from services.gateway.responses.stream import ResponseEvents
from services.gateway.session import AnswerDelta, Finished, Reasoning, Session, Sessions, TimedOut

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
    def __init__(self, sessions: Sessions, store: ResponseStore) -> None:
        self.sessions = sessions
        self.store = store

    # ------------------------------------------------------------ create

    async def create(self, req: ResponseCreateRequest, caller: str, http: Request) -> JSONResponse | StreamingResponse:
        with self.sessions.outcome(ENDPOINT) as outcome:
            history = await self._history(req.previous_response_id, caller) if req.previous_response_id else []
            chat, conversion = to_chat(req, history)
            background, stream = bool(req.background), bool(req.stream)
            try:
                session = await self.sessions.open(
                    chat,
                    kind="response",
                    caller=caller,
                    include_usage=True,
                    stream=stream,
                    background=background,
                    response=echo_of(req),
                )
            except InvalidArgument as err:
                raise renamed(err, conversion) from None
            outcome.of(session)
            job_id = session.job_id
            if req.store is not False:
                await self.store.put(job_id, StoredResponse(caller=caller, input=item_dicts([*history, *req.items()])))
            if stream:
                events = self._stream(session)
                return StreamingResponse(events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
            if background:
                return JSONResponse(content=_json(render.pending(job_id, session.record)))
            end = await session.wait(http)
            obj = render.finished(job_id, end.result, end.record)
            await self._keep(job_id, obj)
            if obj.status == "failed":
                raise_for_failure(end.result)
            return JSONResponse(content=_json(obj))

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

    async def _stream(self, session: Session) -> AsyncIterator[bytes]:
        """The typed events (``stream.py``) of the session's events: a started job's shell, the
        reasoning item (what the search does, as it runs), the message (answer deltas), the final
        object. The events of one session event go out in one write."""
        job_id = session.job_id
        events = ResponseEvents(job_id)
        shell = render.pending(job_id, session.record).model_copy(update={"status": "in_progress"})
        yield events.lifecycle("response.created", shell) + events.lifecycle("response.in_progress", shell)
        async for event in session.events():
            out: list[bytes] = []
            if isinstance(event, Reasoning):
                out = events.reasoning_delta(event.source, event.kind, event.text)
            elif isinstance(event, AnswerDelta):
                out = events.text_delta(event.text)
            elif isinstance(event, Finished):
                obj = render.finished(job_id, event.result, event.record, reasoning=events.reasoning_text)
                await self._keep(job_id, obj)
                out = events.finish(obj)
            elif isinstance(event, TimedOut):
                message = f"response {job_id} did not finish within its deadline"
                out = [events.event("error", code="timeout", message=message, param=None)]
            if out:
                yield b"".join(out)

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
        record = await self.sessions.record(job_id)
        if record is None or record.kind != "response" or (caller is not None and record.caller not in (None, caller)):
            raise not_found(response_id)
        if entry is None and not record.background and (record.response or {}).get("store") is False:
            raise not_found(response_id)  # store: false keeps nothing; only a background job is followed
        result = await self.sessions.result(job_id)
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
            await self.sessions.cancel(job_id, "api")
            obj = await self.retrieve(response_id, caller)
        return obj

    async def delete(self, response_id: str, caller: str | None) -> DeletedResponse:
        """Forget a response (cancelling it first if it still runs); its id answers 404 afterwards."""
        obj = await self.cancel(response_id, caller)
        job_id = render.job_id_of(obj.id)
        assert job_id is not None
        entry = await self.store.get(job_id)
        record = await self.sessions.record(job_id)
        owner = entry.caller if entry is not None else record.caller if record is not None else caller
        await self.store.delete(job_id, owner)
        return DeletedResponse(id=obj.id)


def _json(obj: ResponseObject) -> dict[str, Any]:
    return obj.model_dump(mode="json")
