"""The Responses API's typed SSE events (``event: <type>`` + ``data: <json>``), numbered in order.

The sequence for a streamed response (what ``client.responses.stream`` accumulates):
``response.created`` → ``response.in_progress`` → while the search runs, the reasoning item
(``output_item.added``, ``content_part.added`` of a ``reasoning_text`` part, one
``reasoning_text.delta`` per stretch of the model's tokens or the search's event lines, each
labelled in its ``ttc`` field, ``reasoning_text.done``, ``content_part.done``,
``output_item.done``; absent for a client that opted out) → the message item (``output_item.added``,
``content_part.added``, ``output_text.delta`` per answer delta, ``output_text.done``,
``content_part.done``, ``output_item.done``) → one function-call item per tool call → the
final ``response.completed`` (or ``response.incomplete`` at the token cap, ``response.failed``),
whose reasoning item adds the search's summary to the streamed text.
"""

from __future__ import annotations

import json
from typing import Any

from services.gateway.labels import Labels
from services.gateway.responses.objects import (
    FunctionCallOutput,
    MessageOutput,
    OutputText,
    ReasoningOutput,
    ReasoningText,
    ResponseObject,
)

_FINAL_EVENT = {"completed": "response.completed", "incomplete": "response.incomplete"}


def sse(event: str, payload: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()


class ResponseEvents:
    """Builds one stream's events; tracks the sequence number, open items and their text."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.seq = 0
        self.next_index = 0
        self.labels = Labels()
        self.reasoning_index: int | None = None  # the open reasoning item's
        self.reasoning_id = f"rs_{job_id}"
        self.reasoning_items = 0
        self.reasoning_text = ""  # all reasoning streamed (the final reasoning item's content)
        self.item_text = ""  # the open reasoning item's
        self.message_index: int | None = None
        self.message_text = ""

    def event(self, type_: str, **fields: Any) -> bytes:
        payload = {"type": type_, "sequence_number": self.seq, **fields}
        self.seq += 1
        return sse(type_, payload)

    def lifecycle(self, type_: str, response: ResponseObject) -> bytes:
        return self.event(type_, response=response.model_dump(mode="json"))

    # ------------------------------------------------------------ reasoning (what the search does)

    def reasoning_delta(self, source: str, kind: str, text: str) -> list[bytes]:
        """One stretch of the search's reasoning as a ``reasoning_text`` delta, labelled (the
        header line of ``labels.py`` in the text, ``{"source", "kind"}`` in the event's ``ttc``);
        opens a reasoning item on the first (a new one if reasoning follows the answer's start)."""
        out: list[bytes] = []
        if self.reasoning_index is None:
            self.reasoning_items += 1
            self.reasoning_id = f"rs_{self.job_id}" + ("" if self.reasoning_items == 1 else f"_{self.reasoning_items}")
            self.reasoning_index, self.item_text = self._index(), ""
            item = ReasoningOutput(id=self.reasoning_id, summary=[], content=[], status="in_progress")
            out.append(self.event("response.output_item.added", output_index=self.reasoning_index, item=_dump(item)))
            out.append(
                self.event(
                    "response.content_part.added",
                    item_id=self.reasoning_id,
                    output_index=self.reasoning_index,
                    content_index=0,
                    part=_dump(ReasoningText(text="")),
                )
            )
        shown = self.labels.text(source, kind, text)
        self.reasoning_text += shown
        self.item_text += shown
        out.append(
            self.event(
                "response.reasoning_text.delta",
                item_id=self.reasoning_id,
                output_index=self.reasoning_index,
                content_index=0,
                delta=shown,
                ttc={"source": source, "kind": kind},
            )
        )
        return out

    def reasoning_end(self) -> list[bytes]:
        """Close the open reasoning item (before the answer's message opens, or at the end)."""
        if self.reasoning_index is None:
            return []
        index, text = self.reasoning_index, self.item_text
        self.reasoning_index = None
        item = ReasoningOutput(id=self.reasoning_id, summary=[], content=[ReasoningText(text=text)])
        common = {"item_id": self.reasoning_id, "output_index": index, "content_index": 0}
        return [
            self.event("response.reasoning_text.done", text=text, **common),
            self.event("response.content_part.done", part=_dump(ReasoningText(text=text)), **common),
            self.event("response.output_item.done", output_index=index, item=_dump(item)),
        ]

    # ------------------------------------------------------------ the answer message

    @property
    def message_id(self) -> str:
        return f"msg_{self.job_id}"

    def text_delta(self, text: str) -> list[bytes]:
        """One answer delta; closes the reasoning item and opens the message on the first."""
        out = self.reasoning_end()
        if self.message_index is None:
            self.message_index = self._index()
            item = MessageOutput(id=self.message_id, status="in_progress", content=[])
            out.append(self.event("response.output_item.added", output_index=self.message_index, item=_dump(item)))
            out.append(
                self.event(
                    "response.content_part.added",
                    item_id=self.message_id,
                    output_index=self.message_index,
                    content_index=0,
                    part=_dump(OutputText(text="")),
                )
            )
        if text:
            self.message_text += text
            out.append(
                self.event(
                    "response.output_text.delta",
                    item_id=self.message_id,
                    output_index=self.message_index,
                    content_index=0,
                    delta=text,
                    logprobs=[],
                )
            )
        return out

    def finish(self, final: ResponseObject) -> list[bytes]:
        """Close every open item with its final form from ``final``, add the items not yet
        streamed (an answer sent whole, tool calls), then the terminal lifecycle event."""
        out = self.reasoning_end()
        message = next((i for i in final.output if isinstance(i, MessageOutput)), None)
        if message is not None:
            final_text = message.content[0].text if message.content else ""
            if self.message_index is None or not final_text.startswith(self.message_text):
                out += self.text_delta(final_text)  # a fresh message carrying the whole answer
            elif len(final_text) > len(self.message_text):
                out += self.text_delta(final_text[len(self.message_text) :])
            index = self.message_index
            part = message.content[0] if message.content else OutputText(text=self.message_text)
            common = {"item_id": self.message_id, "output_index": index, "content_index": 0}
            out.append(self.event("response.output_text.done", text=part.text, logprobs=[], **common))
            out.append(self.event("response.content_part.done", part=_dump(part), **common))
            out.append(self.event("response.output_item.done", output_index=index, item=_dump(message)))
        for call in (i for i in final.output if isinstance(i, FunctionCallOutput)):
            index = self._index()
            opening = call.model_copy(update={"arguments": "", "status": "in_progress"})
            out.append(self.event("response.output_item.added", output_index=index, item=_dump(opening)))
            common = {"item_id": call.id, "output_index": index}
            out.append(self.event("response.function_call_arguments.delta", delta=call.arguments, **common))
            out.append(self.event("response.function_call_arguments.done", arguments=call.arguments, **common))
            out.append(self.event("response.output_item.done", output_index=index, item=_dump(call)))
        out.append(self.lifecycle(_FINAL_EVENT.get(final.status, "response.failed"), final))
        return out

    def _index(self) -> int:
        index = self.next_index
        self.next_index += 1
        return index


def _dump(item: Any) -> dict[str, Any]:
    return item.model_dump(mode="json")  # type: ignore[no-any-return]
