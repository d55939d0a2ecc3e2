"""Faults with real processes: a worker killed mid-job, a gateway restarted with background
jobs pending, a streaming client that hangs up, and component outages (the verifier down after
candidates exist; the policy service stopped after candidates exist and before the first one)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import httpx
import pytest
import redis

from services.gateway.errors import UNAVAILABLE_RETRY_AFTER_S
from services.gen.ttc.v1 import verifier_pb2, verifier_pb2_grpc
from services.jobs import events as ev
from services.jobs.errors import JobError
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer, grpc_healthy

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
    """A worker SIGKILLed while it holds a job: another worker finishes it, once.

    The job must still be running when the worker dies, on a host of any speed, so it is held at
    a barrier rather than raced: both requests are queued while no worker runs, the policy
    process is paused (SIGSTOP), and only then does the first worker take them. Its generation
    call cannot return until the test resumes the policy (SIGCONT), after the kill."""
    for worker in stack.workers:
        worker.stop()
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

    # A client waiting synchronously through the crash gets exactly one response.
    sync_reply: dict[str, Any] = {}

    def wait_sync() -> None:
        sync = {**body, "background": False, "max_tokens": 24}
        sync_reply["r"] = httpx.post(f"{stack.url}/v1/chat/completions", json=sync, timeout=300)

    waiter = threading.Thread(target=wait_sync)
    waiter.start()
    stack.wait_for(lambda: stack.queue_length() >= 2, timeout=60, what="both jobs queued")
    assert stack.policy is not None
    with stack.policy.paused():
        first = stack.start_worker(concurrency=2)
        holder = _wait_running(stack, job_id)["worker"]
        assert first.proc is not None and holder.endswith(f":{first.proc.pid}")
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


def _worker_cancellations(stack: GatewayStack) -> float:
    """Searches the stack's live workers stopped for a cancel; each had dropped its policy call
    by then (cancelling a gRPC call needs no answer from the policy service)."""
    return sum(
        stack.metric(f"http://127.0.0.1:{port}/metrics", "ttc_orchestrator_cancellations_total")
        for worker, port in zip(stack.workers, stack.worker_metrics_ports, strict=True)
        if worker.proc is not None and worker.proc.poll() is None
    )


def _wait_cancelled(stack: GatewayStack, job_id: str, cancellations_before: float) -> None:
    """The job's record says cancelled and its worker stopped the search, its engine call with it."""
    stack.wait_for(lambda: _record(stack, job_id).get("status") == "cancelled", timeout=30, what="job cancelled")
    stack.wait_for(
        lambda: _worker_cancellations(stack) > cancellations_before, timeout=30, what="the worker to stop the job"
    )


def _wait_aborted(stack: GatewayStack, aborted_before: float) -> None:
    """The engine counted one more cancelled request and has none in flight."""
    stack.wait_for(
        lambda: stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled") > aborted_before,
        timeout=30,
        what="engine abort",
    )
    stack.wait_for(lambda: _engine_in_flight(stack) == 0, timeout=30, what="the engine to go idle")


def _engine_in_flight(stack: GatewayStack) -> float:
    """Policy calls in flight; a streamed answer generates through GenerateStream."""
    return sum(
        stack.policy_metric("ttc_requests_in_flight", service="policy", method=method)
        for method in ("Generate", "GenerateStream")
    )


def test_streaming_disconnect_cancels_job_and_aborts_engine(stack: GatewayStack) -> None:
    if not any(w.proc is not None and w.proc.poll() is None for w in stack.workers):
        stack.start_worker()
    aborted_before = stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled")
    cancellations_before = _worker_cancellations(stack)
    # A counting prompt at temperature 0 keeps the engine busy for the whole max_tokens.
    body = {
        "model": MODEL,
        "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
        "max_tokens": 1500,
        "temperature": 0,
        "reasoning_effort": "none",
        "stream": True,
    }
    assert stack.policy is not None
    with contextlib.ExitStack() as frozen:
        with httpx.Client(timeout=60) as http, http.stream("POST", f"{stack.url}/v1/completions", json=body) as resp:
            assert resp.status_code == 200
            lines = resp.iter_lines()  # keep the iterator: dropping it closes the connection
            first = next(lines)
            assert first.startswith("data: ")
            job_id = json.loads(first.removeprefix("data: "))["id"].split("-", 1)[1]
            _wait_running(stack, job_id)
            stack.wait_for(lambda: _engine_in_flight(stack) >= 1, timeout=60, what="engine request in flight")
            # Frozen from here until its call is cancelled, the engine cannot finish the request
            # by itself, however fast this host decodes.
            frozen.enter_context(stack.policy.paused())
        # The client hung up: the job is cancelled and its worker drops the engine call.
        _wait_cancelled(stack, job_id, cancellations_before)
    # Let go, the engine finds its call cancelled and aborts the request.
    _wait_aborted(stack, aborted_before)
    assert stack.gateway_metric("ttc_gateway_cancellations_total", cause="disconnect") >= 1
    assert _result_events(stack, job_id) == 1


def test_waiting_client_hang_up_cancels_job_and_aborts_engine(stack: GatewayStack) -> None:
    """A non-streamed request whose client hangs up while it waits: the gateway sees the
    disconnect from the ASGI receive (no polling), cancels the job and the engine aborts."""
    if not any(w.proc is not None and w.proc.poll() is None for w in stack.workers):
        stack.start_worker()
    aborted_before = stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled")
    cancellations_before = _worker_cancellations(stack)
    client = redis.Redis.from_url(stack.redis.url)

    def jobs() -> set[bytes]:
        return {k for k in client.scan_iter("ttc:job:*", count=1000) if k.count(b":") == 2}

    known = jobs()
    body = json.dumps(
        {
            "model": MODEL,
            "prompt": "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,",
            "max_tokens": 1500,
            "temperature": 0,
            "reasoning_effort": "none",
        }
    ).encode()
    head = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += f"Content-Length: {len(body)}\r\n\r\n"
    assert stack.policy is not None
    with contextlib.ExitStack() as frozen:
        with socket.create_connection(("127.0.0.1", stack.gateway_port), timeout=60) as sock:
            sock.sendall(head.encode() + body)
            stack.wait_for(lambda: bool(jobs() - known), timeout=60, what="job enqueued")
            job_id = (jobs() - known).pop().decode().split(":")[2]
            _wait_running(stack, job_id)
            stack.wait_for(lambda: _engine_in_flight(stack) >= 1, timeout=60, what="engine request in flight")
            # Frozen until its call is cancelled: the engine cannot finish the request by itself.
            frozen.enter_context(stack.policy.paused())
        # The socket is closed: the waiting request hung up, and its worker drops the engine call.
        _wait_cancelled(stack, job_id, cancellations_before)
    # Let go, the engine finds its call cancelled and aborts the request.
    _wait_aborted(stack, aborted_before)
    assert _result_events(stack, job_id) == 1


# ---- component outages: typed errors, and the best answer so far once a candidate exists ----
# The rule (docs/architecture.md, "Errors"): a component failing before any candidate exists
# fails the job with its typed error (UNAVAILABLE -> 503 + Retry-After); once a candidate
# exists, the reply is 200 with the best answer so far, ttc.termination "error" and ttc.error.
# These run last in this module: the outage fixture stops the policy service.

PINNED_PROMPT = "What is 12 + 30? Answer with a number."


def _typed_record_error(stack: GatewayStack, job_id: str) -> JobError:
    """The typed error the job's record holds (written with the result, read back as a JobError)."""
    record = _record(stack, job_id)
    assert "error" in record, record
    return JobError(**json.loads(record["error"]))


def _pinned(ttc: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": PINNED_PROMPT}],
        "max_tokens": 24,
        "temperature": 0,
        "seed": 5,
        "reasoning_effort": "none",
        "ttc": ttc,
        **extra,
    }


def test_verifier_outage_after_candidates_answers_the_best_so_far(stack: GatewayStack) -> None:
    """The stack's workers point at a verifier target nothing listens on: best-of-n generates
    its candidates, then its one verifier call fails."""
    if not any(w.proc is not None and w.proc.poll() is None for w in stack.workers):
        stack.start_worker()
    body = _pinned({"strategy": "best_of_n", "n": 2, "verifier": "orm"})
    reply = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=300)
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["choices"][0]["message"]["content"].strip()
    ttc = data["ttc"]
    assert ttc["strategy"] == "best_of_n"
    assert ttc["candidates_generated"] == 2
    assert ttc["termination"] == "error"
    assert ttc["error"]["code"] == "UNAVAILABLE"
    assert ttc["error"]["component"] == "verifier"
    assert ttc["error"]["field"] == ""
    assert ttc["error"]["message"].startswith("verifier: ")
    # The record holds the same typed error, and the job counts as succeeded (it answered).
    job_id = data["id"].removeprefix("chatcmpl-")
    assert _record(stack, job_id)["status"] == "succeeded"
    assert _typed_record_error(stack, job_id) == JobError(**ttc["error"])


class BlockingVerifier(verifier_pb2_grpc.VerifierServicer):  # type: ignore[misc]
    """A verifier that holds its first call until the test releases it, then scores 0.2."""

    def __init__(self) -> None:
        self.called = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def Verify(self, request: verifier_pb2.VerifyRequest, context: grpc.ServicerContext) -> verifier_pb2.VerifyResponse:
        self.calls += 1
        self.called.set()
        if not self.release.wait(timeout=240):
            context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "the test never released the verifier")
        verdict = verifier_pb2.CandidateVerdict(score=0.2, passed=False, feedback="Check the arithmetic.")
        return verifier_pb2.VerifyResponse(verdicts=[verdict for _ in request.candidates])


@dataclass
class Outage:
    revision: httpx.Response  # the policy stopped after its first attempt was generated and scored
    unstarted: httpx.Response  # a sync request queued behind it, started after the stop
    background_id: str  # a background job queued behind it, started after the stop
    unstarted_id: str
    stopped_at: float
    verifier: BlockingVerifier


@pytest.fixture(scope="module")
def outage(stack: GatewayStack) -> Iterator[Outage]:
    """One worker (one job at a time) whose verifier holds the revision's first Verify call. While
    it is held: two more jobs are queued behind it (the policy is still up, so the gateway takes
    them) and the policy service is stopped. Released, the revision's next policy call fails
    (candidates exist); the two queued jobs then start with the policy already down."""
    verifier = BlockingVerifier()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    verifier_pb2_grpc.add_VerifierServicer_to_server(verifier, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        for worker in stack.workers:  # the outage worker must be the queue's only consumer
            worker.stop()
        # The outage tests check what a job answers once its wait for the policy is over (2 s).
        extra = {"TTC_ORCHESTRATOR_VERIFIER_TARGET": f"127.0.0.1:{port}", "TTC_ORCHESTRATOR_POLICY_WAIT_S": "2"}
        stack.start_worker(concurrency=1, extra=extra)
        replies: dict[str, httpx.Response] = {}

        def post(name: str, body: dict[str, Any]) -> None:
            replies[name] = httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=300)

        revision = threading.Thread(
            target=post, args=("revision", _pinned({"strategy": "revision", "n": 1, "params": {"rounds": 1}}))
        )
        revision.start()
        assert verifier.called.wait(timeout=240), "the revision never reached its verifier"

        client = redis.Redis.from_url(stack.redis.url)
        before = set(client.scan_iter(match=ev.job_key("*")))
        single = _pinned({"strategy": "single"})
        background_id = httpx.post(
            f"{stack.url}/v1/chat/completions", json={**single, "background": True}, timeout=30
        ).json()["id"]
        unstarted = threading.Thread(target=post, args=("unstarted", single))
        unstarted.start()
        new_keys: set[bytes] = set()

        def both_queued() -> bool:
            nonlocal new_keys
            new_keys = set(client.scan_iter(match=ev.job_key("*"))) - before
            return len(new_keys) == 2

        stack.wait_for(both_queued, timeout=30, what="two jobs queued behind the revision")
        (unstarted_id,) = {k.decode().removeprefix(ev.job_key("")) for k in new_keys} - {background_id}
        for job_id in (background_id, unstarted_id):
            assert _record(stack, job_id)["status"] == "queued"  # not started: no candidate can exist

        assert stack.policy is not None
        stack.policy.stop()
        assert not grpc_healthy(stack.policy_target)
        stopped_at = time.time()
        verifier.release.set()

        revision.join(300)
        unstarted.join(300)
        stack.wait_for(
            lambda: _record(stack, background_id).get("status") == "failed", timeout=120, what="background job failed"
        )
        yield Outage(replies["revision"], replies["unstarted"], background_id, unstarted_id, stopped_at, verifier)
    finally:
        verifier.release.set()
        server.stop(grace=None)


def test_policy_stopped_after_candidates_answers_the_best_so_far(stack: GatewayStack, outage: Outage) -> None:
    reply = outage.revision
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["choices"][0]["message"]["content"].strip()  # the first attempt, scored before the stop
    ttc = data["ttc"]
    assert ttc["strategy"] == "revision"
    assert ttc["candidates_generated"] == 1  # the revision itself was never generated
    assert ttc["verifier_verdict"]["score"] == pytest.approx(0.2)
    assert ttc["termination"] == "error"
    assert ttc["error"]["code"] == "UNAVAILABLE"
    assert ttc["error"]["component"] == "policy"
    assert ttc["error"]["message"].startswith("policy: ")
    assert outage.verifier.calls == 1  # the search stopped at the failed revision, not later
    job_id = data["id"].removeprefix("chatcmpl-")
    assert _record(stack, job_id)["status"] == "succeeded"
    assert _typed_record_error(stack, job_id) == JobError(**ttc["error"])


def test_policy_stopped_before_the_first_candidate_is_503(stack: GatewayStack, outage: Outage) -> None:
    # The job started only after the policy had stopped: no candidate could exist.
    assert float(_record(stack, outage.unstarted_id)["started_at"]) >= outage.stopped_at
    reply = outage.unstarted
    assert reply.status_code == 503, reply.text
    assert reply.headers["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_S)
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}  # an OpenAI error object
    assert error["type"] == "server_error"
    assert error["code"] == "service_unavailable"
    assert error["param"] is None
    # The worker's typed error, not the gateway's own policy check (which says "at <target>").
    assert error["message"].startswith("the policy service is unavailable: policy: ")
    assert _typed_record_error(stack, outage.unstarted_id).code == "UNAVAILABLE"


def test_policy_stopped_before_the_first_candidate_background_job(stack: GatewayStack, outage: Outage) -> None:
    job_id = outage.background_id
    record = _record(stack, job_id)
    assert record["status"] == "failed"
    assert float(record["started_at"]) >= outage.stopped_at
    error = _typed_record_error(stack, job_id)
    assert (error.code, error.component, error.field) == ("UNAVAILABLE", "policy", "")
    assert error.message.startswith("policy: ")
    assert _result_events(stack, job_id) == 1

    job = httpx.get(f"{stack.url}/v1/jobs/{job_id}", timeout=10).json()
    assert job["status"] == "failed"
    assert job["error"]["code"] == "service_unavailable"
    assert "result" not in job
    result = httpx.get(f"{stack.url}/v1/jobs/{job_id}/result", timeout=10)
    assert result.status_code == 503, result.text
    assert result.headers["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_S)
    assert result.json()["error"]["message"] == job["error"]["message"]
