"""Server-sent event chunks of a streamed completion, OpenAI's shapes.

A chat stream is: a role chunk; while the search runs, what it is doing as ``reasoning_content``
deltas - the model's tokens and the search's event lines, each stretch from a new part of the
search opened by a header line (``labels.py``) and every chunk labelled in ``delta.ttc``
(``{"source": "candidate 2", "kind": "tokens"}``); the chosen answer's text as ``content``
deltas as the worker streams them (``answer_delta`` events, token by token where the strategy
generates the answer last); once the search ends, the chosen answer's evidence
(``SearchResult.reasoning``: the program, its output and the votes) under the source
``evidence`` unless the search streamed it itself, then its tool calls as
``tool_calls`` deltas, the further answers of ``n`` > 1 (choices 1..n-1), the answers' token
logprobs, one finish chunk per choice and, when asked, a usage chunk with the ``ttc`` report.
A client that opted out of reasoning (``ttc.stream_reasoning: false``) gets no
``reasoning_content``. A legacy completions stream has the same order with ``text`` choices
and no reasoning (completions have no such field).
"""

from __future__ import annotations

import json
from typing import Any

from services.gateway.formatting import (
    answers_of,
    chat_logprobs,
    completion_logprobs,
    finish_reason,
    report_of,
)
from services.gateway.labels import EVENT, Labels
from services.gateway.protocol import (
    ChatCompletionChunk,
    ChunkChoice,
    ChunkDelta,
    CompletionChoice,
    CompletionResponse,
    ToolCallDelta,
    ToolCallFunctionDelta,
)
from services.gateway.protocol.replies import ReasoningLabel
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord

EVIDENCE = "evidence"  # the source label of the answer's evidence, sent once the search ends


def sse(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


class Chunks:
    """Builds one stream's chunks (chat or legacy completions) for one job."""

    def __init__(self, endpoint: str, job_id: str, model: str, created: int) -> None:
        self.chat = endpoint == "chat"
        self.id = f"chatcmpl-{job_id}" if self.chat else f"cmpl-{job_id}"
        self.model = model
        self.created = created
        self.labels = Labels()
        self.reasoning_text = ""  # every reasoning character sent, headers included
        self.sources: set[str] = set()  # the sources streamed (the search sends its own ``evidence``)

    def _chunk(self, choices: list[Any], usage: Any = None, report: Any = None) -> bytes:
        if self.chat:
            body: Any = ChatCompletionChunk(
                id=self.id, created=self.created, model=self.model, choices=choices, usage=usage, ttc=report
            )
        else:
            body = CompletionResponse(
                id=self.id, created=self.created, model=self.model, choices=choices, usage=usage, ttc=report
            )
        payload = body.model_dump(exclude_none=True)
        for choice in payload["choices"]:
            choice.setdefault("finish_reason", None)  # OpenAI sends an explicit null until the last chunk
        return sse(payload)

    def delta(self, delta: ChunkDelta, index: int = 0, reason: str | None = None, logprobs: Any = None) -> bytes:
        if self.chat:
            return self._chunk([ChunkChoice(index=index, delta=delta, finish_reason=reason, logprobs=logprobs)])
        text = delta.content or ""
        completion_reason = reason if reason in ("stop", "length") else ("stop" if reason else None)
        choice = CompletionChoice(index=index, text=text, finish_reason=completion_reason, logprobs=logprobs)
        return self._chunk([choice])

    def role(self) -> bytes:
        return self.delta(ChunkDelta(role="assistant", content=""))

    def reasoning(self, source: str, kind: str, text: str, index: int = 0) -> bytes | None:
        """One stretch of the search's reasoning as ``reasoning_content``, labelled (chat only;
        completions have no such field)."""
        if not self.chat:
            return None
        shown = self.labels.text(source, kind, text)
        self.reasoning_text += shown
        self.sources.add(source)
        delta = ChunkDelta(reasoning_content=shown, ttc=ReasoningLabel(source=source, kind=kind))
        return self.delta(delta, index)

    def content(self, text: str, index: int = 0) -> bytes:
        return self.delta(ChunkDelta(content=text), index)

    def ending(
        self, result: orchestrator_pb2.SearchResult, record: JobRecord, streamed: str, reasoning: bool = True
    ) -> list[bytes]:
        """Everything after the search: the chosen answer's evidence (labelled ``evidence``), the
        answer's text not yet streamed, its tool calls, the other choices
        (with their evidence), logprobs, a finish chunk per choice and the usage chunk.
        ``reasoning``: false for a client that wants the answer alone."""
        out: list[bytes] = []
        for index, answer in enumerate(answers_of(result)):
            text = answer.text
            if index == 0 and streamed:
                # The worker streamed the answer; send only what the final text adds (normally nothing).
                text = text[len(streamed) :] if text.startswith(streamed) else ""
            if reasoning and self.chat and answer.reasoning:
                if index > 0:
                    out.append(self.delta(ChunkDelta(reasoning_content=answer.reasoning), index))
                elif EVIDENCE not in self.sources:  # a worker that did not stream it
                    piece = self.reasoning(EVIDENCE, EVENT, answer.reasoning)
                    out += [piece] if piece is not None else []
            if text:
                out.append(self.content(text, index))
            if answer.tool_calls and self.chat:
                deltas = [
                    ToolCallDelta(
                        index=i,
                        id=call.id,
                        type="function",
                        function=ToolCallFunctionDelta(name=call.name, arguments=call.arguments),
                    )
                    for i, call in enumerate(answer.tool_calls)
                ]
                out.append(self.delta(ChunkDelta(tool_calls=deltas), index))
            logprobs: Any = None
            if record.logprobs:
                logprobs = (chat_logprobs if self.chat else completion_logprobs)(answer.logprobs, True)
            out.append(self.delta(ChunkDelta(), index, finish_reason(answer), logprobs))
        if record.include_usage:
            out.append(self._chunk([], usage_of(result, record), report_of(result, record)))
        return out
