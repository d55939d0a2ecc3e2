"""The typed events of a job session (``session.py``): the renderers of chat/completions and
of the Responses API read a job through these, never through its Redis stream; and the two
rules the session applies to the search's reasoning (who wants it, how a window's deltas join)."""

from __future__ import annotations

from dataclasses import dataclass

from services.gateway.protocol import Usage
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord


@dataclass(frozen=True)
class Reasoning:
    """What the search is doing: ``source`` the part that wrote it ("candidate 3", "vote"),
    ``kind`` "tokens" (text the model decoded) or "event" (a line the search wrote)."""

    source: str
    kind: str
    text: str


@dataclass(frozen=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True)
class Finished:
    result: orchestrator_pb2.SearchResult
    record: JobRecord  # the record written at enqueue, with the worker's start and the finish
    usage: Usage


@dataclass(frozen=True)
class TimedOut:
    """The deadline passed; ``started``: a worker had started the job (else it never left the queue)."""

    job_id: str
    started: bool


Event = Reasoning | AnswerDelta | Finished | TimedOut


def reasoning_of(deltas: orchestrator_pb2.ReasoningDeltas) -> list[Reasoning]:
    """One job event's deltas, with neighbours of the same source and kind joined (the worker's
    window may split one candidate's text in many deltas: one renders them as one chunk)."""
    out: list[Reasoning] = []
    for delta in deltas.deltas:
        if not delta.text:
            continue
        if out and (out[-1].source, out[-1].kind) == (delta.source, delta.kind):
            out[-1] = Reasoning(delta.source, delta.kind, out[-1].text + delta.text)
        else:
            out.append(Reasoning(delta.source, delta.kind, delta.text))
    return out
