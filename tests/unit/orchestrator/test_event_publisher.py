"""The one numbering of a job's events (services/orchestrator/events.py), used by the worker's
Redis stream and the direct RunSearch stream alike: reasoning before the answer delta that
follows it, every event one number higher than the last, a quiet job's reasoning dropped."""

from __future__ import annotations

import asyncio

from services.gen.ttc.v1 import orchestrator_pb2
from services.orchestrator.events import JobEventPublisher
from services.search.interfaces import ReasoningDelta


def _kind(event: orchestrator_pb2.JobEvent) -> str:
    return str(event.WhichOneof("event"))


async def test_reasoning_goes_out_before_the_answer_delta_and_every_event_is_numbered() -> None:
    sent: list[orchestrator_pb2.JobEvent] = []

    async def send(event: orchestrator_pb2.JobEvent) -> None:
        sent.append(event)

    publisher = JobEventPublisher("job-1", send, quiet=False)
    sink = publisher.on_reasoning
    assert sink is not None
    sink(ReasoningDelta(source="candidate 1", kind="tokens", text="thinking"))
    await publisher.answer("The answer")  # flushes the window first, though its timer has not fired
    sink(ReasoningDelta(source="vote", kind="event", text="3 of 4"))
    await publisher.flush()
    last = publisher.event(result=orchestrator_pb2.SearchResult(job_id="job-1", answer="The answer"))

    assert [_kind(e) for e in sent] == ["reasoning", "answer_delta", "reasoning"]
    assert sent[0].reasoning.deltas[0].text == "thinking" and sent[1].answer_delta == "The answer"
    assert [e.sequence for e in [*sent, last]] == [1, 2, 3, 4]
    assert {e.job_id for e in [*sent, last]} == {"job-1"}
    assert _kind(last) == "result" and last.result.answer == "The answer"
    assert publisher.streamed


async def test_an_event_carries_only_its_own_field_even_an_empty_answer() -> None:
    async def send(event: orchestrator_pb2.JobEvent) -> None:
        del event

    publisher = JobEventPublisher("job-2", send, quiet=True)
    reasoning = publisher.event(reasoning=orchestrator_pb2.ReasoningDeltas())
    assert _kind(reasoning) == "reasoning"  # not clobbered by an empty answer_delta (one oneof)
    assert _kind(publisher.event(answer_delta="")) == "answer_delta"
    assert not publisher.streamed  # an event made, not sent, is no streamed answer


async def test_a_quiet_job_sends_no_reasoning_and_close_drops_a_buffered_window() -> None:
    sent: list[orchestrator_pb2.JobEvent] = []

    async def send(event: orchestrator_pb2.JobEvent) -> None:
        sent.append(event)

    quiet = JobEventPublisher("q", send, quiet=True)
    assert quiet.on_reasoning is None
    await quiet.answer("42")
    assert [(_kind(e), e.sequence) for e in sent] == [("answer_delta", 1)]

    sent.clear()
    loud = JobEventPublisher("c", send, quiet=False)
    sink = loud.on_reasoning
    assert sink is not None
    sink(ReasoningDelta(source="candidate 1", kind="tokens", text="dropped"))
    loud.close()  # the job was cancelled: nobody reads on
    await asyncio.sleep(0.1)  # past the batching window: nothing fires
    await loud.flush()
    assert sent == []
