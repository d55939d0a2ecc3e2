"""Overload: offered load far above what one single-slot worker can serve.

Expected: admission control first lowers the effort of admitted requests (reported in the
response and in metrics), then sheds with 429 + Retry-After and an OpenAI error body; no
request hangs or ends in a 5xx, and /healthz keeps answering throughout.

The policy service is frozen (SIGSTOP) while the requests arrive, so the worker's first job
holds its one slot and the queue builds however fast this host decodes; it goes on once every
request has been admitted or shed, and the admitted ones are served.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis

from services.jobs import events as ev
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e
OFFERED = 40


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(
        redis_server,
        gateway_env={
            "TTC_GATEWAY_MAX_QUEUE_DEPTH": "8",
            "TTC_GATEWAY_DEGRADE_QUEUE_DEPTH": "2",
            "TTC_GATEWAY_RETRY_AFTER_S": "3",
        },
    )
    try:
        s.start_policy()
        s.start_worker(concurrency=1)
        s.start_gateway()
        yield s
    finally:
        s.stop()


async def _offer(stack: GatewayStack) -> tuple[list[httpx.Response], list[float]]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 7 * 6?"}],
        "max_tokens": 12,
        "reasoning_effort": "low",
    }
    health: list[float] = []
    done = asyncio.Event()

    async def probe_health(client: httpx.AsyncClient) -> None:
        while not done.is_set():
            start = time.perf_counter()
            reply = await client.get(f"{stack.url}/healthz", timeout=5)
            assert reply.status_code == 200
            health.append(time.perf_counter() - start)
            await asyncio.sleep(0.05)

    async def one(client: httpx.AsyncClient, i: int) -> httpx.Response:
        await asyncio.sleep(i * 0.02)
        return await client.post(f"{stack.url}/v1/chat/completions", json=body, timeout=600)

    store = redis.Redis.from_url(stack.redis.url)

    def jobs() -> set[bytes]:
        """The job records in Redis (one per admitted request)."""
        return {k for k in store.scan_iter(match=ev.job_key("*"), count=1000) if k.count(b":") == 2}

    known = jobs()
    limits = httpx.Limits(max_connections=OFFERED + 4)
    async with httpx.AsyncClient(limits=limits) as client:
        watcher = asyncio.create_task(probe_health(client))
        assert stack.policy is not None
        with stack.policy.paused():
            calls = [asyncio.create_task(one(client, i)) for i in range(OFFERED)]
            deadline = time.monotonic() + 120
            # every request answered (shed) or admitted (its job recorded: it waits for the engine)
            while sum(call.done() for call in calls) + len(jobs() - known) < OFFERED:
                assert time.monotonic() < deadline, "the offered requests were neither admitted nor shed"
                await asyncio.sleep(0.05)
        replies = await asyncio.wait_for(asyncio.gather(*calls), timeout=900)
        done.set()
        await watcher
    return list(replies), health


def test_overload_degrades_then_sheds_without_5xx(stack: GatewayStack) -> None:
    replies, health = asyncio.run(_offer(stack))
    statuses = [r.status_code for r in replies]
    assert all(s < 500 for s in statuses), [(r.status_code, r.text[:300]) for r in replies if r.status_code >= 500]
    assert set(statuses) <= {200, 429}, statuses
    shed = [r for r in replies if r.status_code == 429]
    served = [r.json() for r in replies if r.status_code == 200]
    assert shed, "offered load far above capacity must shed some requests"
    for r in shed:
        assert int(r.headers["retry-after"]) == 3
        error: dict[str, Any] = r.json()["error"]
        assert error["code"] == "overloaded" and "queue" in error["message"]
    assert served, "some requests must still be served"
    degraded = [b for b in served if b["ttc"]["effort_applied"] != b["ttc"]["effort_requested"]]
    assert degraded, "admitted requests under load must run at a lower effort"
    assert all("queue_depth" in b["ttc"]["degraded_by"] for b in degraded)
    assert all(b["choices"][0]["message"]["content"] is not None for b in served)
    assert stack.gateway_metric("ttc_gateway_effort_degradations_total", requested="low", signal="queue_depth") >= 1
    assert stack.gateway_metric("ttc_gateway_shed_total", reason="queue_depth") == len(shed)
    assert health, "the health probe never ran"
    print(
        f"\noverload: offered={len(replies)} served={len(served)} degraded={len(degraded)} shed={len(shed)} "
        f"healthz p50={statistics.median(health) * 1000:.1f}ms max={max(health) * 1000:.1f}ms n={len(health)}"
    )
