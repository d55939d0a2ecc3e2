"""A job session on the gateway (``session.py``): the renderers see its typed events, its finish
charges the key once (waited, streamed or in the background), the deadline and an abandoned
foreground job cancel, and the token limit reserves a budget that a concurrent burst overshoots
by at most one request's budget (the reservation script on a real Redis)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from services.common.metrics import ServiceMetrics
from services.gateway import limits
from services.gateway.errors import HTTPError
from services.gateway.limits import Limiter, Reservation, budget_of, prompt_bound, settlement
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.routing import Route
from services.gateway.serving import Serving
from services.gateway.session import AnswerDelta, Finished, Reasoning, Sessions, TimedOut
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs.record import JobRecord

PROMPT = "What is 17 + 25?"


def _result(**extra: Any) -> orchestrator_pb2.SearchResult:
    return orchestrator_pb2.SearchResult(
        job_id="j1",
        strategy="single",
        termination=orchestrator_pb2.TERMINATION_COMPLETED,
        budget_used=orchestrator_pb2.BudgetUse(generated_tokens=30, prompt_tokens=40),
        answer_tokens=4,
        started_at=5.0,
        **extra,
    )


class FakeQueue:
    """The job queue as a worker would leave it: the events in order, a stored record."""

    queue = "q"

    def __init__(self, events: list[orchestrator_pb2.JobEvent], stored: JobRecord | None = None) -> None:
        self.events, self.stored = events, stored
        self.enqueued: list[orchestrator_pb2.SearchJob] = []
        self.cancelled: list[str] = []

    async def depth(self) -> int:
        return 0

    async def enqueue(self, job: orchestrator_pb2.SearchJob, record: JobRecord, trace_context: Any = None) -> None:
        self.enqueued.append(job)

    async def follow(self, job_id: str, last_id: str = "0-0", until: float | None = None) -> AsyncIterator[Any]:
        # The real follow returns without a result only at ``until``: a list without one is a deadline.
        for i, event in enumerate(self.events[int(last_id.split("-")[0]) :], start=int(last_id.split("-")[0])):
            yield f"{i + 1}-0", event
            await asyncio.sleep(0)

    async def record(self, job_id: str) -> JobRecord | None:
        return self.stored

    async def result(self, job_id: str) -> orchestrator_pb2.SearchResult | None:
        return None

    async def cancel(self, job_id: str, cause: str) -> bool:
        self.cancelled.append(cause)
        return True


class FakeLimiter:
    def __init__(self) -> None:
        self.reserved: list[int] = []
        self.settled: list[tuple[Reservation | None, int]] = []

    async def check(self, caller: str) -> None:
        return None

    async def reserve(self, caller: str, tokens: int) -> Reservation:
        self.reserved.append(tokens)
        return Reservation(caller, 1, tokens)

    async def settle(self, reservation: Reservation | None, used: int) -> None:
        self.settled.append((reservation, used))


class FakePlanner:
    async def plan(self, req: Any, depth: int, owner: str = "") -> Plan:
        job = orchestrator_pb2.SearchJob(
            job_id="j1",
            model="m",
            enqueued_at=1.0,
            owner=owner,
            messages=[common_pb2.ChatMessage(role="user", content=PROMPT)],
        )
        job.strategy.name = "single"
        job.budget.max_generated_tokens = 100
        return Plan(job, Route(strategy="single", token_budget=100), "none", "none")


def _sessions(queue: FakeQueue, limiter: FakeLimiter | None = None, name: str = "s") -> Sessions:
    metrics = GatewayMetrics(ServiceMetrics(f"gateway-session-{name}"))
    return Sessions(FakePlanner(), queue, limiter or FakeLimiter(), metrics, 10.0)  # type: ignore[arg-type]


def _chat(**extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": PROMPT}], **extra}
    )


async def _open(sessions: Sessions, stream: bool = False, background: bool = False) -> Any:
    return await sessions.open(
        _chat(stream=stream),
        kind="chat.completion",
        caller="k",
        include_usage=True,
        stream=stream,
        background=background,
    )


def frames(piece: bytes) -> list[bytes]:
    """The SSE frames of one write (the gateway may send several in one)."""
    return [frame for frame in piece.split(b"\n\n") if frame]


def _sample(metrics: GatewayMetrics, name: str, **labels: str) -> float:
    return metrics.base.registry.get_sample_value(name, labels) or 0.0


# ---------------------------------------------------------------- the renderers see typed events


def _reasoning(*deltas: tuple[str, str, str]) -> orchestrator_pb2.JobEvent:
    parts = [orchestrator_pb2.ReasoningDelta(source=s, kind=k, text=t) for s, k, t in deltas]
    return orchestrator_pb2.JobEvent(reasoning=orchestrator_pb2.ReasoningDeltas(deltas=parts))


async def test_the_chat_stream_renders_the_sessions_events_and_times_the_first_answer_token() -> None:
    events = [
        _reasoning(("candidate 1", "tokens", "Hi")),
        orchestrator_pb2.JobEvent(answer_delta="Hel"),
        orchestrator_pb2.JobEvent(answer_delta="lo"),
        orchestrator_pb2.JobEvent(result=_result(answer="Hello", finish_reason="stop")),
    ]
    limiter = FakeLimiter()
    sessions = _sessions(FakeQueue(events), limiter, "stream")
    session = await _open(sessions, stream=True)
    raw = [frame for piece in [p async for p in Serving(sessions)._stream(session, "chat")] for frame in frames(piece)]
    assert raw[-1] == b"data: [DONE]"
    chunks = [json.loads(r[6:]) for r in raw[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[1] == {"reasoning_content": "[candidate 1] Hi", "ttc": {"source": "candidate 1", "kind": "tokens"}}
    assert [d.get("content") for d in deltas[2:4]] == ["Hel", "lo"]  # forwarded one by one, not re-sent
    assert "".join(d.get("content") or "" for d in deltas) == "Hello"
    assert chunks[-1]["usage"]["completion_tokens"] == 30
    metrics = sessions.metrics
    assert _sample(metrics, "ttc_gateway_time_to_first_token_seconds_count", stream="true") == 1
    assert _sample(metrics, "ttc_gateway_time_to_first_answer_token_seconds_count") == 1
    await asyncio.sleep(0)  # the settlement runs as its own task
    assert limiter.settled == [(Reservation("k", 1, limiter.reserved[0]), 70)]


async def test_events_are_typed_and_the_finish_runs_once() -> None:
    events = [
        orchestrator_pb2.JobEvent(progress=orchestrator_pb2.Progress(message="step")),  # an older worker's
        _reasoning(("vote", "event", "3 of 5 on 42")),
        orchestrator_pb2.JobEvent(answer_delta="4"),
        orchestrator_pb2.JobEvent(result=_result(answer="42")),
    ]
    limiter = FakeLimiter()
    session = await _open(_sessions(FakeQueue(events), limiter, "typed"))
    seen = [e async for e in session.events()]
    assert [type(e) for e in seen] == [Reasoning, AnswerDelta, Finished]  # the narration is dropped
    finished = seen[-1]
    assert isinstance(finished, Finished) and finished.usage.total_tokens == 70
    assert finished.record.started_at == 5.0 and finished.record.finished_at is not None
    assert await session.finish(finished.result) is finished  # once
    await asyncio.sleep(0)
    assert len(limiter.settled) == 1


# ---------------------------------------------------------------- charging, cancelling, the deadline


async def test_a_background_job_is_followed_and_charged_when_it_finishes() -> None:
    queue = FakeQueue([orchestrator_pb2.JobEvent(result=_result(answer="42"))])
    limiter = FakeLimiter()
    sessions = _sessions(queue, limiter, "background")
    session = await _open(sessions, background=True)
    for _ in range(20):
        await asyncio.sleep(0)
    assert [used for _, used in limiter.settled] == [70]
    assert session.followed and queue.cancelled == []
    assert _sample(sessions.metrics, "ttc_gateway_completion_tokens_total", effort="none") == 30
    # A background job's end is no response time.
    assert _sample(sessions.metrics, "ttc_gateway_time_to_first_token_seconds_count", stream="false") == 0


async def test_a_stream_left_early_cancels_a_foreground_job_and_hands_a_background_one_on() -> None:
    events = [orchestrator_pb2.JobEvent(answer_delta="4"), orchestrator_pb2.JobEvent(result=_result(answer="4"))]
    queue, limiter = FakeQueue(events), FakeLimiter()
    sessions = _sessions(queue, limiter, "left")
    foreground = await _open(sessions, stream=True)
    stream = foreground.events()
    assert isinstance(await anext(stream), AnswerDelta)
    await stream.aclose()  # the client went away
    for _ in range(20):
        await asyncio.sleep(0)
    # Settled once the worker's spend is known: no worker started it here, so it spent nothing.
    assert queue.cancelled == ["disconnect"] and [used for _, used in limiter.settled] == [0]

    background = await _open(sessions, stream=True, background=True)
    stream = background.events()
    assert isinstance(await anext(stream), AnswerDelta)
    await stream.aclose()
    for _ in range(20):
        await asyncio.sleep(0)
    assert queue.cancelled == ["disconnect"] and background.followed
    assert [used for _, used in limiter.settled] == [0, 70]  # followed from where the stream left, to the end


async def test_a_cancellation_the_gateway_recorded_is_settled_by_what_its_worker_spent() -> None:
    """Here no worker started the job (no ``started_at``): it spent nothing. The cases with a
    worker, on a real Redis: ``test_session_settle.py``."""
    cancelled = orchestrator_pb2.SearchResult(job_id="j1", termination=orchestrator_pb2.TERMINATION_CANCELLED)
    limiter = FakeLimiter()
    session = await _open(_sessions(FakeQueue([orchestrator_pb2.JobEvent(result=cancelled)]), limiter, "kept"))
    assert [type(e) for e in [e async for e in session.events()]] == [Finished]
    for _ in range(5):
        await asyncio.sleep(0)
    assert [used for _, used in limiter.settled] == [0]


@pytest.mark.parametrize(("stored", "status"), [(None, 429), (JobRecord(started_at=1.0), 504)])
async def test_the_deadline_cancels_and_answers_429_in_the_queue_or_504_once_started(
    stored: JobRecord | None, status: int
) -> None:
    queue = FakeQueue([orchestrator_pb2.JobEvent(progress=orchestrator_pb2.Progress(message="x"))], stored)
    session = await _open(_sessions(queue, name=f"deadline-{status}"))
    ends = [e async for e in session.events()]
    assert isinstance(ends[-1], TimedOut) and ends[-1].started == (stored is not None)
    assert queue.cancelled == ["deadline"]

    queue.cancelled.clear()
    waiting = await _open(_sessions(queue, name=f"wait-{status}"))

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    from starlette.requests import Request

    with pytest.raises(HTTPError) as caught:
        await waiting.wait(Request({"type": "http"}, receive))
    assert caught.value.status == status and queue.cancelled == ["deadline"]


# ---------------------------------------------------------------- the reservation arithmetic


def test_the_budget_is_the_search_budget_the_prompt_bound_and_the_probe() -> None:
    job = orchestrator_pb2.SearchJob(messages=[common_pb2.ChatMessage(role="user", content="héllo")])
    job.budget.max_generated_tokens = 500
    bound = prompt_bound(job)
    assert bound >= len("héllo".encode()) + limits.TEMPLATE_TOKENS + limits.TEMPLATE_TOKENS_PER_MESSAGE
    assert budget_of(job, probe_tokens=30) == 500 + bound + 30
    with_tools = orchestrator_pb2.SearchJob()
    with_tools.CopyFrom(job)
    with_tools.tools.tools.add(name="get_weather", parameters_json='{"type":"object"}')
    assert prompt_bound(with_tools) > bound


@pytest.mark.parametrize(
    ("reserved", "used", "now", "expected"),
    [
        (100, 70, 5, (5, -30)),  # in its window: the difference, given back
        (100, 130, 5, (5, 30)),  # ... or charged on top
        (100, 100, 5, None),
        (100, 70, 6, None),  # the window ended: what was reserved there stays there
        (100, 130, 6, (6, 30)),  # only the excess, into the current window
    ],
)
def test_a_settlement_replaces_the_reservation_by_the_usage(
    reserved: int, used: int, now: int, expected: tuple[int, int] | None
) -> None:
    assert settlement(Reservation("k", 5, reserved), used, now) == expected


def test_a_concurrent_burst_overshoots_the_limit_by_at_most_one_budget(redis_url: str) -> None:
    async def body() -> None:
        client = aioredis.Redis.from_url(redis_url)
        limit, budget = 1000, 300
        limiter = Limiter(client, 0, limit)
        try:
            await client.flushdb()
            replies = await asyncio.gather(
                *(limiter.reserve("burst", budget) for _ in range(20)), return_exceptions=True
            )
            admitted = [r for r in replies if isinstance(r, Reservation)]
            refused = [r for r in replies if isinstance(r, HTTPError)]
            assert len(admitted) + len(refused) == 20
            assert all(r.status == 429 and r.code == "tokens_exceeded" for r in refused)
            assert len(admitted) == 4  # 0, 300, 600, 900 < 1000: admitted; 1200 and on: refused
            window = admitted[0].window
            spent = int(await client.get(f"ttc:limit:tokens:burst:{window}") or 0)
            assert limit <= spent <= limit + budget
            # Each settles to what it used: the window holds the real usage.
            await asyncio.gather(*(limiter.settle(r, 100) for r in admitted))
            if limits.window_of(__import__("time").time())[0] == window:
                assert int(await client.get(f"ttc:limit:tokens:burst:{window}") or 0) == 400
                await limiter.check("burst")  # below the limit again: admitted
        finally:
            await client.aclose()

    asyncio.run(body())
