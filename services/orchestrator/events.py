"""One job's event stream as the search produces it, numbered in one place.

A job's events leave in one order whoever carries them (the queued job's Redis stream in
``worker.py``, the direct ``RunSearch`` stream in ``servicer.py``): the search's reasoning in
windows (``ReasoningBatcher``), each answer delta after the reasoning buffered before it, then
the closing event (the whole answer, or the result). Every event gets the next ``sequence``
number, so a reader can tell a gap or a repeat. Both carriers build their stream with this
class and hand it only how an event is sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from services.gen.ttc.v1 import orchestrator_pb2
from services.orchestrator.reasoning import ReasoningBatcher
from services.search.interfaces import ReasoningSink

#: sends one event on (a Redis XADD, a queue put)
Send = Callable[[orchestrator_pb2.JobEvent], Awaitable[None]]


class JobEventPublisher:
    """Numbers and sends one job's events; a quiet job's reasoning is neither buffered nor sent."""

    def __init__(self, job_id: str, send: Send, *, quiet: bool) -> None:
        self.job_id = job_id
        self._send = send
        self._reasoning = None if quiet else ReasoningBatcher(self._send_reasoning)
        self.sequence = 0  # the number of the last event made
        self.streamed = False  # an answer delta has gone out

    @property
    def on_reasoning(self) -> ReasoningSink | None:
        """The search's reasoning sink (``run_search(on_reasoning=...)``); None for a quiet job."""
        return self._reasoning.add if self._reasoning is not None else None

    def event(
        self,
        *,
        reasoning: orchestrator_pb2.ReasoningDeltas | None = None,
        answer_delta: str = "",
        result: orchestrator_pb2.SearchResult | None = None,
    ) -> orchestrator_pb2.JobEvent:
        """The job's next event carrying the one field given, numbered; not sent (the caller
        sends it, or records it with the result)."""
        self.sequence += 1
        event = orchestrator_pb2.JobEvent(job_id=self.job_id, sequence=self.sequence)
        if reasoning is not None:
            event.reasoning.CopyFrom(reasoning)
        elif result is not None:
            event.result.CopyFrom(result)
        else:
            event.answer_delta = answer_delta
        return event

    async def _send_reasoning(self, deltas: orchestrator_pb2.ReasoningDeltas) -> None:
        await self._send(self.event(reasoning=deltas))

    async def answer(self, delta: str) -> None:
        """Send an answer delta (the search's ``on_answer``), after the reasoning before it."""
        await self.flush()
        self.streamed = True
        await self._send(self.event(answer_delta=delta))

    async def flush(self) -> None:
        """Send the buffered reasoning now: before the job's closing event."""
        if self._reasoning is not None:
            await self._reasoning.flush()

    def close(self) -> None:
        """Drop the buffered reasoning (the search stopped without a result to follow it)."""
        if self._reasoning is not None:
            self._reasoning.close()
