"""Faults with real processes: a worker killed mid-job, a gateway restarted with background
jobs pending, a streaming client that hangs up."""

from __future__ import annotations

import json
import threading
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
LONG_PROMPT = "Write a long story about a lighthouse keeper and the sea."


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server)
    try:
        s.start_policy()
        s.start_gateway()
        yield s
    finally:
        s.stop()


def _record(stack: GatewayStack, job_id: str) -> dict[str, Any]:
    raw = redis.Redis.from_url(stack.redis.url).hgetall(ev.job_key(job_id))
    return {k.decode(): v.decode().strip('"') for k, v in raw.items()}


def _result_events(stack: GatewayStack, job_id: str) -> int:
    from services.gen.ttc.v1 import orchestrator_pb2

    count = 0
    for _, fields in redis.Redis.from_url(stack.redis.url).xrange(ev.events_key(job_id)):
        event = orchestrator_pb2.JobEvent()
        event.ParseFromString(fields[b"e"])
        count += event.HasField("result")
    return count


def _wait_running(stack: GatewayStack, job_id: str) -> dict[str, Any]:
    def running() -> bool:
        record = _record(stack, job_id)
        assert record.get("status") in (None, "queued", "running"), record
        return record.get("status") == "running"

    stack.wait_for(running, timeout=120, what="job running")
    return _record(stack, job_id)


def test_killed_worker_job_finishes_on_another_worker_once(stack: GatewayStack) -> None:
    first = stack.start_worker(concurrency=2)
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": LONG_PROMPT}],
        "max_tokens": 96,
        "temperature": 0.7,
        "seed": 3,
        "reasoning_effort": "none",
        "background": True,
    }
    job_id = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=30).json()["id"]
    holder = _wait_running(stack, job_id)["worker"]
    assert first.proc is not None and holder.endswith(f":{first.proc.pid}")

    # A client waiting synchronously through the crash gets exactly one response.
    sync_reply: dict[str, Any] = {}

    def wait_sync() -> None:
        sync = {**body, "background": False, "max_tokens": 24}
        sync_reply["r"] = httpx.post(f"{stack.url}/v1/chat/completions", json=sync, timeout=300)

    waiter = threading.Thread(target=wait_sync)
    waiter.start()
    time.sleep(1.0)
    first.kill()  # SIGKILL mid-job: no acknowledgement, no result
    assert _record(stack, job_id)["status"] == "running"
    second = stack.start_worker(concurrency=2)
    stack.wait_for(
        lambda: _record(stack, job_id).get("status") in ("succeeded", "failed"), timeout=180, what="redelivered job"
    )
    record = _record(stack, job_id)
    assert record["status"] == "succeeded", record
    assert second.proc is not None and record["worker"].endswith(f":{second.proc.pid}")
    job = httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()
    assert job["result"]["choices"][0]["message"]["content"]
    assert _result_events(stack, job_id) == 1
    waiter.join(300)
    assert sync_reply["r"].status_code == 200, sync_reply["r"].text
    assert sync_reply["r"].json()["choices"][0]["message"]["content"]
    redelivered = stack.metric(
        f"http://127.0.0.1:{stack.worker_metrics_ports[-1]}/metrics", "ttc_orchestrator_jobs_total", outcome="ok"
    )
    assert redelivered >= 1


def test_gateway_restart_keeps_background_results(stack: GatewayStack) -> None:
    if not any(w.proc is not None and w.proc.poll() is None for w in stack.workers):
        stack.start_worker()
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Name a colour."}],
        "max_tokens": 16,
        "reasoning_effort": "none",
        "background": True,
    }
    ids = [httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=30).json()["id"] for _ in range(3)]
    assert stack.gateway is not None
    stack.gateway.stop()
    stack.start_gateway()  # same port, a fresh process
    for job_id in ids:
        stack.wait_for(
            lambda job_id=job_id: (
                httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()["status"] == "succeeded"
            ),
            timeout=180,
            what=f"job {job_id}",
        )
        result = httpx.get(f"{stack.url}/v1/jobs/{job_id}/result", timeout=10)
        assert result.status_code == 200
        assert result.json()["choices"][0]["message"]["content"]
        assert result.json()["usage"]["completion_tokens"] >= 1


def test_streaming_disconnect_cancels_job_and_aborts_engine(stack: GatewayStack) -> None:
    if not any(w.proc is not None and w.proc.poll() is None for w in stack.workers):
        stack.start_worker()
    aborted_before = stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled")
    # A counting prompt at temperature 0 keeps the engine busy for the whole max_tokens.
    body = {
        "model": MODEL,
        "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
        "max_tokens": 1500,
        "temperature": 0,
        "reasoning_effort": "none",
        "stream": True,
    }
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{stack.url}/v1/completions", json=body) as resp:
        assert resp.status_code == 200
        lines = resp.iter_lines()  # keep the iterator: dropping it closes the connection
        first = next(lines)
        assert first.startswith("data: ")
        job_id = json.loads(first.removeprefix("data: "))["id"].split("-", 1)[1]
        _wait_running(stack, job_id)
        stack.wait_for(
            lambda: stack.policy_metric("ttc_requests_in_flight", service="policy", method="Generate") >= 1,
            timeout=60,
            what="engine request in flight",
        )
    # The client hung up: the job is cancelled and the engine request aborted.
    stack.wait_for(lambda: _record(stack, job_id).get("status") == "cancelled", timeout=30, what="job cancelled")
    stack.wait_for(
        lambda: stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled") > aborted_before,
        timeout=30,
        what="engine abort",
    )
    assert stack.policy_metric("ttc_requests_in_flight", service="policy", method="Generate") == 0
    assert stack.gateway_metric("ttc_gateway_cancellations_total", cause="disconnect") >= 1
    assert _result_events(stack, job_id) == 1
