"""Redis with its append-only file (as ``ttc stack`` and compose run it): a background job queued
while no worker runs survives a Redis restart, and a worker started afterwards finishes it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
import redis

from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e


def test_queued_background_job_survives_a_redis_restart(tmp_path: Path) -> None:
    server = RedisServer(aof_dir=tmp_path).start()
    stack = GatewayStack(server)
    try:
        stack.start_policy()
        stack.start_gateway()
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "What is 2 + 3?"}],
            "max_tokens": 8,
            "reasoning_effort": "none",
            "background": True,
        }
        reply = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 202, (reply.text, stack.gateway.log() if stack.gateway else "")
        job_id = reply.json()["id"]
        assert stack.queue_length() == 1
        time.sleep(1.5)  # appendfsync everysec: what a crash could lose is the last second
        server.stop()  # SIGTERM: Redis rewrites nothing, the AOF already holds the job
        assert list(tmp_path.rglob("*.aof")), "no append-only file written"
        server.start()
        assert redis.Redis.from_url(server.url).llen(stack.queue) == 1
        assert httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()["status"] == "queued"
        stack.start_worker(concurrency=1)

        def done() -> bool:
            return httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()["status"] == "succeeded"

        stack.wait_for(done, timeout=120, what="the job queued before the restart to complete")
        job = httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()
        assert job["result"]["choices"][0]["message"]["content"]
    finally:
        stack.stop()
        server.stop()
