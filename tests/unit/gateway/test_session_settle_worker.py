"""A client that hangs up on a job a real worker is decoding: its key is charged what the
worker decoded, not the job's whole reservation (``cancel_settlement.py``).

The session (real ``JobQueue``, real ``Limiter``, real Redis) cancels; a real ``JobRunner`` runs
the job against an in-process policy whose streams send ``SENT`` counted chunks per call and
then stall (``tests/unit/orchestrator/test_partial_usage.py``), stops on the cancel and keeps
its spend beside the gateway's cancellation; the session's follow-up settles with it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
import redis.asyncio as aioredis
from starlette.requests import Request

from services.common.metrics import ServiceMetrics
from services.gateway import limits
from services.gateway.difficulty import Estimate
from services.gateway.errors import HTTPError
from services.gateway.limits import Limiter
from services.gateway.metrics import GatewayMetrics
from services.gateway.planning import Plan
from services.gateway.protocol import ChatCompletionRequest
from services.gateway.routing import Route
from services.gateway.session import Sessions
from services.gateway.usage import usage_of
from services.jobs import events as ev
from services.jobs.celery_app import make_celery
from services.jobs.queue import JobQueue
from services.orchestrator.worker import JobRunner
from tests.helpers.processes import RedisServer
from tests.helpers.search_jobs import make_job
from tests.unit.orchestrator.test_cancelled_usage import runner
from tests.unit.orchestrator.test_partial_usage import SENT, StallingPolicy, served

__all__ = ["runner", "served"]  # the worker and in-process policy fixtures

WINDOW = 2000
QUEUE = "ttc.search.settle-worker"
PROBE = Estimate(difficulty=0.5, prompt_tokens=7, generated_tokens=5)


class Planner:
    """A quiet best-of-2 job (its calls stream, so a cut-off call still says what it cost)."""

    async def plan(self, req: Any, depth: int, owner: str = "") -> Plan:
        job = make_job("best_of_n", n=2)
        job.job_id, job.quiet, job.owner, job.enqueued_at = uuid.uuid4().hex, True, owner, time.time()
        return Plan(job, Route(strategy="best_of_n", token_budget=5000), "none", "none", probe=PROBE)


async def test_a_hang_up_charges_the_tokens_the_worker_decoded(
    runner: JobRunner,
    served: tuple[StallingPolicy, str],
    redis_server: RedisServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(limits, "window_of", lambda now: (WINDOW, 30))
    client = aioredis.Redis.from_url(redis_server.url)
    queue = JobQueue(client, make_celery(redis_server.url, queue=QUEUE), QUEUE, 60)
    metrics = GatewayMetrics(ServiceMetrics("gateway-settle-worker"))
    sessions = Sessions(Planner(), queue, Limiter(client, 0, 1_000_000), metrics, job_timeout_s=10.0)  # type: ignore[arg-type]
    caller, key = "worker-key", f"ttc:limit:tokens:worker-key:{WINDOW}"
    try:
        await client.delete(key, QUEUE)
        req = ChatCompletionRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "6*7?"}]})
        session = await sessions.open(
            req, kind="chat.completion", caller=caller, include_usage=True, stream=False, background=False
        )
        assert session.reservation is not None
        reserved = session.reservation.tokens
        assert reserved > 5000 and int(await client.get(key) or 0) == reserved

        # The worker takes the job (as its Celery task would) and decodes until the streams stall.
        job = ev.encode_job(session.plan.job)
        ran = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(runner.run(job), runner.loop))
        fake = served[0]
        deadline = time.monotonic() + 10
        while not fake.requests and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        with pytest.raises(HTTPError) as caught:
            await session.wait(Request({"type": "http"}, receive))
        assert caught.value.status == 499
        assert await asyncio.wait_for(ran, 10) == "cancelled"

        spent = await queue.result(session.job_id)  # the gateway's cancellation, with the worker's spend
        assert spent is not None and spent.started_at > 0
        calls = spent.budget_used.policy_calls
        assert calls >= 1 and spent.budget_used.generated_tokens == SENT * calls
        charged = usage_of(spent, session.record).total_tokens
        assert 12 + SENT * calls < charged < reserved

        deadline = time.monotonic() + 5
        while int(await client.get(key) or 0) != charged:
            assert time.monotonic() < deadline, f"window {await client.get(key)!r}, expected {charged}"
            await asyncio.sleep(0.02)
    finally:
        await sessions.aclose()
        await client.delete(key, QUEUE)
        await client.aclose()
