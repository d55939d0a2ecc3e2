"""A job the gateway cancelled is settled with what its worker spent (``cancel_settlement.py``).

Real Redis, the real ``JobQueue`` (enqueue, cancel), the real ``Limiter`` (reserve, settle) and
the session; the worker's side is written as a worker writes it: ``JobEvents.start`` (the one
script that checks for a result and marks the job running) and, once its search stopped on the
cancel, its spend beside the gateway's cancellation (``JobRunner._record_cancelled``).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as aioredis
from starlette.requests import Request

from services.common.metrics import ServiceMetrics
from services.gateway import limits
from services.gateway import session as session_module
from services.gateway.cancel_settlement import account_after_cancel, gateway_cancelled
from services.gateway.difficulty import Estimate
from services.gateway.errors import HTTPError
from services.gateway.limits import Limiter
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.routing import Route
from services.gateway.session import Session, Sessions, TimedOut
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from services.jobs.queue import JobQueue

WINDOW = 1000  # every reservation and settlement here falls in this one window (no minute turns)
QUEUE = "ttc.search.settle"
PROBE = Estimate(difficulty=0.5, prompt_tokens=7, generated_tokens=5)  # 12 tokens the probe spent
SPENT = orchestrator_pb2.BudgetUse(prompt_tokens=20, generated_tokens=40, policy_calls=1)  # 60


class Planner:
    """A plan per request with a fresh job id and a probe that spent ``PROBE``."""

    async def plan(self, req: Any, depth: int, owner: str = "") -> Plan:
        job = orchestrator_pb2.SearchJob(
            job_id=uuid.uuid4().hex,
            model="m",
            enqueued_at=time.time(),
            owner=owner,
            messages=[common_pb2.ChatMessage(role="user", content="What is 17 + 25?")],
        )
        job.strategy.name = "single"
        job.budget.max_generated_tokens = 500
        return Plan(job, Route(strategy="single", token_budget=500), "none", "none", probe=PROBE)


@pytest.fixture(autouse=True)
def one_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "window_of", lambda now: (WINDOW, 30))


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    redis = aioredis.Redis.from_url(redis_url)
    yield redis
    await redis.aclose()


@pytest.fixture
async def sessions(client: aioredis.Redis, redis_url: str) -> AsyncIterator[Sessions]:
    queue = JobQueue(client, make_celery(redis_url, queue=QUEUE), QUEUE, 60)
    metrics = GatewayMetrics(ServiceMetrics(f"gateway-settle-{uuid.uuid4().hex[:8]}"))
    made = Sessions(Planner(), queue, Limiter(client, 0, 100_000), metrics, job_timeout_s=10.0)  # type: ignore[arg-type]
    yield made
    await made.aclose()


async def _open(sessions: Sessions, caller: str, background: bool = False) -> Session:
    req = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    return await sessions.open(
        req, kind="chat.completion", caller=caller, include_usage=True, stream=False, background=background
    )


async def _window(client: aioredis.Redis, caller: str) -> int:
    return int(await client.get(f"ttc:limit:tokens:{caller}:{WINDOW}") or 0)


async def _until(check: Callable[[], Awaitable[bool]], within_s: float = 5.0) -> None:
    deadline = time.monotonic() + within_s
    while not await check():
        assert time.monotonic() < deadline, "the settlement did not happen in time"
        await asyncio.sleep(0.02)


async def _worker_starts(client: aioredis.Redis, job_id: str) -> tuple[bool, bool, bool]:
    return await ev.JobEvents(client, 60).start(job_id, "w1", 30, time.time())


async def _worker_stops(client: aioredis.Redis, job_id: str) -> None:
    """The worker's search stopped on the cancel: the gateway's result stands, its spend goes beside it."""
    spent = orchestrator_pb2.SearchResult(
        job_id=job_id, strategy="single", termination=orchestrator_pb2.TERMINATION_CANCELLED, started_at=time.time()
    )
    spent.budget_used.CopyFrom(SPENT)
    events = ev.JobEvents(client, 60)
    assert not await events.record_result(spent, ev.CANCELLED)
    await events.record_spent(spent)


async def _hang_up(session: Session) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    with pytest.raises(HTTPError) as caught:
        await session.wait(Request({"type": "http"}, receive))
    assert caught.value.status == 499


# ---------------------------------------------------------------- through the session


async def test_a_hang_up_on_a_running_job_is_settled_with_its_workers_spend(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    session = await _open(sessions, "hang-up")
    assert session.reservation is not None
    reserved = session.reservation.tokens
    assert reserved > 500 and await _window(client, "hang-up") == reserved
    assert await _worker_starts(client, session.job_id) == (False, False, True)
    await _hang_up(session)  # the reply does not wait for the settlement
    await asyncio.sleep(0.3)
    assert await _window(client, "hang-up") == reserved  # the worker has not said what it spent yet

    await _worker_stops(client, session.job_id)

    async def settled() -> bool:
        return await _window(client, "hang-up") == 12 + 60

    await _until(settled)  # the probe and the worker's spend replace the reservation
    await asyncio.sleep(0.5)
    assert await _window(client, "hang-up") == 12 + 60  # once
    assert not sessions._tasks  # the follow-up ended


async def test_a_stream_left_early_is_settled_once_its_worker_reports(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    session = await sessions.open(
        ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
        kind="chat.completion",
        caller="stream",
        include_usage=True,
        stream=True,
        background=False,
    )
    await _worker_starts(client, session.job_id)
    await ev.JobEvents(client, 60).publish(session.job_id, orchestrator_pb2.JobEvent(answer_delta="4"))
    stream = session.events()
    assert (await anext(stream)).text == "4"  # type: ignore[union-attr]
    await stream.aclose()  # the client went away: the session cancels, and reads no further
    await _worker_stops(client, session.job_id)

    async def settled() -> bool:
        return await _window(client, "stream") == 12 + 60

    await _until(settled)


async def test_a_job_past_the_deadline_in_the_queue_releases_its_reservation(
    sessions: Sessions, client: aioredis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "QUEUE_GRACE_S", 0.0)
    sessions.job_timeout_s = 0.1  # no worker takes it: the deadline comes at the next empty read (2 s)
    session = await _open(sessions, "deadline")
    assert session.reservation is not None
    ends = [event async for event in session.events()]
    assert isinstance(ends[-1], TimedOut) and not ends[-1].started

    async def released() -> bool:
        return await _window(client, "deadline") == 12

    await _until(released, within_s=1.0)


async def test_a_job_cancelled_in_the_queue_releases_its_reservation_and_a_late_worker_skips_it(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    session = await _open(sessions, "queued")
    await _hang_up(session)

    async def released() -> bool:
        return await _window(client, "queued") == 12

    await _until(released, within_s=1.0)  # nothing to wait for: only the probe was spent
    # The race: a worker that picks the job up as it is cancelled sees the result and skips it.
    has_result, _, _ = await _worker_starts(client, session.job_id)
    record = await sessions.queue.record(session.job_id)
    assert has_result and record is not None and record.started_at is None
    assert await _window(client, "queued") == 12


async def test_a_background_job_cancelled_by_the_api_is_settled_when_its_worker_reports(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    session = await _open(sessions, "api", background=True)  # followed by the session from the start
    assert session.followed and session.reservation is not None
    await _worker_starts(client, session.job_id)
    await sessions.cancel(session.job_id, "api")

    async def finished() -> bool:
        return session._finished is not None

    await _until(finished)  # the follower read the gateway's cancellation and finished with it
    assert session._finished is not None and gateway_cancelled(session._finished.result)
    assert await _window(client, "api") == session.reservation.tokens
    await _worker_stops(client, session.job_id)

    async def settled() -> bool:
        return await _window(client, "api") == 12 + 60

    await _until(settled)


async def test_the_gateway_stopping_cancels_the_follow_up_and_the_reservation_stands(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    session = await _open(sessions, "stop")
    assert session.reservation is not None
    await _worker_starts(client, session.job_id)
    await _hang_up(session)
    assert len(sessions._tasks) == 1  # the follow-up, waiting for the worker
    await sessions.aclose()
    assert not sessions._tasks
    await _worker_stops(client, session.job_id)
    await asyncio.sleep(0.3)
    assert await _window(client, "stop") == session.reservation.tokens
    late = await _open(sessions, "stop-late")  # admitted, but nothing is spawned any more
    await _hang_up(late)
    assert not sessions._tasks


# ---------------------------------------------------------------- the rule itself


async def test_a_worker_that_finished_first_is_charged_its_own_result(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    queue = sessions.queue
    job_id = uuid.uuid4().hex
    await _worker_starts(client, job_id)
    done = orchestrator_pb2.SearchResult(
        job_id=job_id, termination=orchestrator_pb2.TERMINATION_COMPLETED, answer="42", started_at=time.time()
    )
    done.budget_used.CopyFrom(SPENT)
    assert await ev.JobEvents(client, 60).record_result(done, ev.SUCCEEDED)
    assert not await queue.cancel(job_id, "disconnect")  # too late: the job has its result
    account = await account_after_cancel(queue, job_id, runs_for_s=10.0)
    assert account is not None and account.answer == "42" and account.budget_used.generated_tokens == 40


async def test_a_started_job_whose_spend_never_comes_keeps_its_reservation(
    sessions: Sessions, client: aioredis.Redis
) -> None:
    queue = sessions.queue
    job_id = uuid.uuid4().hex
    await _worker_starts(client, job_id)
    assert await queue.cancel(job_id, "deadline")
    began = time.monotonic()
    assert await account_after_cancel(queue, job_id, runs_for_s=0.6, first_poll_s=0.05) is None
    assert 0.5 < time.monotonic() - began < 3.0  # it waited out the worker's deadline, no longer
