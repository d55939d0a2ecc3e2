"""Paths that had no end-to-end test: an explicit cancel of a running job, the per-key token
budget, and admission control on a real engine's KV-cache utilization.

Real processes only: Redis, the policy service on SmolLM2 with a deliberately tiny KV cache
(512 cells, so one long request fills most of it), a Celery worker, and gateways on one queue
that differ only in their settings (limits, KV thresholds).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import redis

from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs import events as ev
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

pytestmark = pytest.mark.e2e

ALICE, BOB = "sk-alice-open", "sk-bob-open"
KEYS = f"alice:{ALICE},bob:{BOB}"
CELLS = 512
# A counting prompt at temperature 0 keeps the engine decoding for the whole max_tokens.
COUNTING = ", ".join(str(i) for i in range(1, 21)) + ","  # ~40 tokens: room for 440 more in 512 cells
#: the job deadline (s) of the stream the deadline test cuts: time enough for its first tokens on
#: a loaded host; the policy is frozen from then until the deadline has cut the call
CUT_DEADLINE_S = 10.0


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[GatewayStack]:
    s = GatewayStack(redis_server, gateway_env={"TTC_GATEWAY_API_KEYS": KEYS})
    try:
        s.start_policy({"TTC_POLICY_N_CTX": str(CELLS), "TTC_POLICY_KV_CACHE_TOKENS": str(CELLS)})
        s.start_worker(concurrency=2)
        s.start_gateway()
        yield s
    finally:
        s.stop()


def extra_gateway(stack: GatewayStack, **settings: str) -> GatewayStack:
    """Another gateway process on the same Redis, queue and policy, with its own settings."""
    other = GatewayStack(
        stack.redis,
        queue=stack.queue,
        policy_port=stack.policy_port,
        policy_metrics_port=stack.policy_metrics_port,
        gateway_env={"TTC_GATEWAY_API_KEYS": KEYS, **{f"TTC_GATEWAY_{k.upper()}": v for k, v in settings.items()}},
    )
    other.start_gateway()
    return other


def long_job(url: str, key: str = ALICE, max_tokens: int = 400, stream: bool = False) -> str:
    """A background completion that keeps the engine decoding; returns its job id. ``stream``:
    its worker publishes the answer's text as it comes (``answer_streamed``)."""
    body = {
        "model": MODEL,
        "prompt": COUNTING,
        "max_tokens": max_tokens,
        "temperature": 0,
        "reasoning_effort": "none",
        "background": True,
        "stream": stream,
    }
    reply = httpx.post(f"{url}/v1/completions", json=body, headers=auth(key), timeout=60)
    assert reply.status_code == 202, reply.text
    return str(reply.json()["id"])


def job_status(url: str, job_id: str, key: str = ALICE) -> str:
    return str(httpx.get(f"{url}/v1/jobs/{job_id}", headers=auth(key), timeout=10).json()["status"])


def engine_decoding(stack: GatewayStack) -> bool:
    """A policy call in flight (the worker streams its calls; unary ones are counted too)."""
    return any(
        stack.policy_metric("ttc_requests_in_flight", service="policy", method=method) >= 1
        for method in ("Generate", "GenerateStream")
    )


def answer_streamed(stack: GatewayStack, job_id: str) -> bool:
    """Whether the job's worker has published text of its answer (a job asked with ``stream``),
    read from the job's event stream in Redis: the worker has had the engine's first tokens."""
    for _, fields in redis.Redis.from_url(stack.redis.url).xrange(ev.events_key(job_id)):
        if orchestrator_pb2.JobEvent.FromString(fields[b"e"]).answer_delta:
            return True
    return False


def wait_finished(url: str, job_id: str, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    status = ""
    while time.monotonic() < deadline:
        status = job_status(url, job_id)
        if status in ("succeeded", "failed", "cancelled"):
            return status
        time.sleep(0.2)
    return status


# ---------------------------------------------------------------------------- cancel while running


def test_cancelling_a_running_job_stops_the_engine(stack: GatewayStack) -> None:
    worker_metrics = f"http://127.0.0.1:{stack.worker_metrics_ports[0]}/metrics"
    aborted = stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled")
    aborted_tokens = stack.policy_metric("ttc_policy_aborted_tokens_total", reason="cancelled")
    cancelled_api = stack.gateway_metric("ttc_gateway_cancellations_total", cause="api")
    worker_cancelled = stack.metric(worker_metrics, "ttc_orchestrator_cancellations_total")
    generated = stack.policy_metric("ttc_tokens_total", kind="generated")
    prompt = stack.policy_metric("ttc_tokens_total", kind="prompt")

    job_id = long_job(stack.url, max_tokens=440, stream=True)
    # Its worker has had the engine's first tokens (and the prompt's count). Frozen from here until
    # the cancel has reached it, the engine cannot decode the rest of the 440 however fast the host.
    stack.wait_for(lambda: answer_streamed(stack, job_id), timeout=60, what="the job's first tokens")
    assert stack.policy is not None
    with stack.policy.paused():
        assert job_status(stack.url, job_id) == "running"
        cancelled_at = time.monotonic()
        reply = httpx.post(f"{stack.url}/v1/jobs/{job_id}/cancel", headers=auth(ALICE), timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json()["status"] == "cancelled"
        # The worker stops the search: its engine call is cancelled before the engine decodes on.
        stack.wait_for(
            lambda: stack.metric(worker_metrics, "ttc_orchestrator_cancellations_total") > worker_cancelled,
            timeout=15,
            what="the worker to count the cancellation",
        )

    # The engine stops: its abort counter moves and no Generate is in flight, promptly.
    stack.wait_for(
        lambda: stack.policy_metric("ttc_policy_aborted_requests_total", reason="cancelled") > aborted,
        timeout=15,
        what="the policy's abort counter",
    )
    stack.wait_for(lambda: not engine_decoding(stack), timeout=15, what="the engine to go idle")
    assert time.monotonic() - cancelled_at < 15
    # It stopped short, and what it decoded before the cancel is counted: some tokens (those its
    # worker had streamed), fewer than the 440 asked for.
    decoded = stack.policy_metric("ttc_tokens_total", kind="generated") - generated
    assert 0 < decoded < 440, decoded
    assert stack.policy_metric("ttc_policy_aborted_tokens_total", reason="cancelled") - aborted_tokens == decoded
    assert stack.gateway_metric("ttc_gateway_cancellations_total", cause="api") == cancelled_api + 1

    # The client sees `cancelled`, now and later; the result is the cancellation error. The job's
    # usage counts what its worker was sent before the cancel: some tokens, and no more than the
    # engine decoded (it may decode a token or two past the last chunk it sent), and the prompt
    # the stream's first chunk reported, as the policy counted it for this one call.
    stack.wait_for(
        lambda: "usage" in httpx.get(f"{stack.url}/v1/jobs/{job_id}", headers=auth(ALICE), timeout=10).json(),
        timeout=15,
        what="the cancelled job's usage",
    )
    job = httpx.get(f"{stack.url}/v1/jobs/{job_id}", headers=auth(ALICE), timeout=10).json()
    assert job["status"] == "cancelled" and job["error"]["message"]
    assert 0 < job["usage"]["completion_tokens"] <= decoded, (job["usage"], decoded)
    prompted = stack.policy_metric("ttc_tokens_total", kind="prompt") - prompt
    assert 0 < job["usage"]["prompt_tokens"] == prompted, (job["usage"], prompted)
    result = httpx.get(f"{stack.url}/v1/jobs/{job_id}/result", headers=auth(ALICE), timeout=10)
    assert result.status_code >= 400 and "cancel" in result.text

    # The engine is free: the next request is served at once.
    started = time.monotonic()
    quick = {"model": MODEL, "prompt": "1, 2, 3,", "max_tokens": 4, "reasoning_effort": "none"}
    done = httpx.post(f"{stack.url}/v1/completions", json=quick, headers=auth(ALICE), timeout=120)
    assert done.status_code == 200, done.text
    assert time.monotonic() - started < 30


# ------------------------------------------------------------------------------ token budget (TPM)


def _fresh_window(margin: float = 15.0) -> None:
    """Wait for a new one-minute window when the current one ends within ``margin`` seconds."""
    left = 60 - time.time() % 60
    if left < margin:
        time.sleep(left + 0.5)


def test_the_per_key_token_budget_answers_429_with_retry_after(stack: GatewayStack) -> None:
    limited = extra_gateway(stack, token_limit_per_minute="60")
    try:
        _fresh_window()
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Count: 1, 2, 3, 4, 5, 6, 7, 8"}],
            "max_tokens": 40,
            "temperature": 0,
            "reasoning_effort": "none",
        }
        first = httpx.post(f"{limited.url}/v1/chat/completions", json=body, headers=auth(ALICE), timeout=120)
        assert first.status_code == 200, first.text
        spent = first.json()["usage"]["total_tokens"]
        assert spent >= 60, spent  # the chat template alone is ~30 prompt tokens

        def refused() -> httpx.Response | None:
            reply = httpx.post(f"{limited.url}/v1/chat/completions", json=body, headers=auth(ALICE), timeout=120)
            return reply if reply.status_code == 429 else None

        # The usage is charged right after the reply; the next request finds the budget spent.
        deadline = time.monotonic() + 10
        reply = refused()
        while reply is None and time.monotonic() < deadline:
            time.sleep(0.2)
            reply = refused()
        assert reply is not None, "the token budget was not enforced"
        error = reply.json()["error"]
        assert error["code"] == "tokens_exceeded" and error["type"]
        retry_after = int(reply.headers["Retry-After"])
        assert 1 <= retry_after <= 61
        assert retry_after >= 60 - time.time() % 60 - 1  # until the window rolls over

        # Per key: bob still has his whole budget.
        other = httpx.post(f"{limited.url}/v1/chat/completions", json=body, headers=auth(BOB), timeout=120)
        assert other.status_code == 200, other.text
    finally:
        limited.stop()


# ------------------------------------------------------------------------ tokens of cut-off work


def test_a_generation_cut_off_by_its_deadline_reports_the_tokens_it_decoded(stack: GatewayStack) -> None:
    """A streamed completion whose job deadline passes mid-decode: the reply's usage (official
    SDK, include_usage) counts the tokens streamed before the cut, and the policy's counters the
    tokens it decoded for the aborted call. The policy is frozen (SIGSTOP) from the stream's first
    text until the reply has ended, so the deadline cuts the call however fast this host decodes;
    uncut, the same greedy completion decodes all its tokens (counting never stops)."""
    import openai

    request: dict[str, Any] = {
        "model": MODEL,
        "prompt": COUNTING,
        "max_tokens": 440,
        "temperature": 0,
        "extra_body": {"reasoning_effort": "none"},
    }
    uncut = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=ALICE, max_retries=0, timeout=120)
    whole = uncut.completions.create(**request)
    assert whole.usage is not None and whole.usage.completion_tokens == 440, whole.usage

    short = extra_gateway(stack, job_timeout_s=f"{CUT_DEADLINE_S:g}")
    aborted = stack.policy_metric("ttc_policy_aborted_tokens_total", reason="cancelled")
    try:
        client = openai.OpenAI(base_url=f"{short.url}/v1", api_key=ALICE, max_retries=0, timeout=60)
        stream = iter(client.completions.create(**request, stream=True, stream_options={"include_usage": True}))
        chunks = []
        for chunk in stream:
            chunks.append(chunk)
            if chunk.choices and chunk.choices[0].text:
                break
        else:
            raise AssertionError(f"the stream ended before its first text: {chunks[-3:]}")
        assert stack.policy is not None
        with stack.policy.paused():  # decodes no more: only the deadline ends the call
            chunks.extend(stream)
    finally:
        short.stop()
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    usage = chunks[-1].usage
    assert usage is not None and streamed, chunks[-3:]
    assert 0 < usage.completion_tokens < request["max_tokens"], usage
    stack.wait_for(
        lambda: stack.policy_metric("ttc_policy_aborted_tokens_total", reason="cancelled") > aborted,
        timeout=15,
        what="the policy to count the aborted call's tokens",
    )
    decoded = stack.policy_metric("ttc_policy_aborted_tokens_total", reason="cancelled") - aborted
    assert decoded >= usage.completion_tokens  # the engine may have decoded a token or two more


def test_a_strong_frequency_penalty_changes_greedy_output(stack: GatewayStack) -> None:
    """Both requests greedy, on this engine, now: the counting prompt continues with ", 21, 22"
    and every ", " repeats, so a frequency penalty of 2 must change the text (compared within
    this run, never with a recording). A presence penalty of 2 subtracts 2 once, less than the
    counting's margins (it left the text unchanged here): its wiring into llama.cpp's sampler is
    unit-tested (tests/unit/policy/test_llamacpp_penalties.py); here it must be accepted."""
    import openai

    client = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=ALICE, max_retries=0, timeout=120)

    def complete(frequency_penalty: float | None = None, presence_penalty: float | None = None) -> str:
        reply = client.completions.create(
            model=MODEL,
            prompt=COUNTING,
            max_tokens=24,
            temperature=0,
            frequency_penalty=frequency_penalty,
            presence_penalty=presence_penalty,
            extra_body={"reasoning_effort": "none"},
        )
        return str(reply.choices[0].text)

    plain = complete()
    assert plain == complete(frequency_penalty=0.0)  # greedy: the same text again
    penalized = complete(frequency_penalty=2.0)
    assert penalized != plain, plain
    assert complete(presence_penalty=2.0).strip() and complete(presence_penalty=-2.0).strip()


# ------------------------------------------------------------------------ KV-cache admission control


def kv_gateway(stack: GatewayStack, **settings: str) -> GatewayStack:
    """A gateway with admission thresholds on KV utilization (``extra_gateway``), polling the engine
    every 50 ms: it sees the long decode of ``_fill_kv`` while that lasts, however fast this host."""
    return extra_gateway(stack, stats_interval_s="0.05", **settings)


def _fill_kv(stack: GatewayStack, gateways: list[GatewayStack], threshold: float) -> str:
    """Start a long decode on the tiny cache and wait until every gateway polled a KV utilization
    of at least ``threshold`` from the real engine; returns the job id. Freeze the policy next
    (``ServiceProcess.paused``) to hold that: a frozen engine answers no poll, and a gateway keeps
    the utilization it polled last while a poll times out."""
    job_id = long_job(stack.url)
    for g in gateways:
        g.wait_for(
            lambda g=g: g.gateway_metric("ttc_gateway_engine_kv_utilization") >= threshold,
            timeout=60,
            what=f"gateway {g.url} to see KV utilization >= {threshold}",
        )
    return job_id


def test_high_kv_utilization_degrades_effort(stack: GatewayStack) -> None:
    degrading = kv_gateway(stack, degrade_kv_utilization="0.25", shed_kv_utilization="1.0")
    try:
        assert degrading.gateway_metric("ttc_gateway_engine_kv_utilization") < 0.25  # idle engine

        def degradations() -> float:
            return degrading.gateway_metric(
                "ttc_gateway_effort_degradations_total", requested="medium", applied="low", signal="kv_utilization"
            )

        before = degradations()
        long_id = _fill_kv(stack, [degrading], 0.25)
        body: dict[str, Any] = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "What is 2 + 2?"}],
            "max_tokens": 8,
            "reasoning_effort": "medium",
        }
        assert stack.policy is not None
        with ThreadPoolExecutor(max_workers=1) as pool:
            # Admitted while the policy is frozen, against the utilization of the long decode
            # (served once it goes on: the job needs the engine).
            with stack.policy.paused():
                url = f"{degrading.url}/v1/chat/completions"
                pending = pool.submit(httpx.post, url, json=body, headers=auth(ALICE), timeout=300)
                degrading.wait_for(lambda: degradations() > before, timeout=30, what="the request admitted")
            reply = pending.result()
        assert reply.status_code == 200, reply.text
        ttc = reply.json()["ttc"]
        assert ttc["effort_requested"] == "medium" and ttc["effort_applied"] == "low"
        assert ttc["degraded_by"] == ["kv_utilization"]
        assert degradations() == before + 1
        assert wait_finished(stack.url, long_id) == "succeeded"
        # Idle again: the same request keeps its effort.
        degrading.wait_for(
            lambda: degrading.gateway_metric("ttc_gateway_engine_kv_utilization") < 0.25, timeout=30, what="idle"
        )
        calm = httpx.post(f"{degrading.url}/v1/chat/completions", json=body, headers=auth(ALICE), timeout=300)
        assert calm.status_code == 200 and calm.json()["ttc"]["effort_applied"] == "medium"
        assert not calm.json()["ttc"].get("degraded_by")
    finally:
        degrading.stop()


def test_kv_utilization_sheds_with_429_and_retry_after(stack: GatewayStack) -> None:
    shedding = kv_gateway(stack, degrade_kv_utilization="0.2", shed_kv_utilization="0.25", retry_after_s="4")
    try:
        shed_before = shedding.gateway_metric("ttc_gateway_shed_total", reason="kv_utilization")
        queued_before = stack.queue_length()
        long_id = _fill_kv(stack, [shedding], 0.25)
        body = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        assert stack.policy is not None
        with stack.policy.paused():  # the gateway keeps the utilization of the long decode
            reply = httpx.post(f"{shedding.url}/v1/chat/completions", json=body, headers=auth(ALICE), timeout=60)
        assert reply.status_code == 429, reply.text
        assert reply.headers["Retry-After"] == "4"
        error = reply.json()["error"]
        assert error["code"] == "overloaded" and "KV cache" in error["message"]
        assert shedding.gateway_metric("ttc_gateway_shed_total", reason="kv_utilization") == shed_before + 1
        assert stack.queue_length() <= queued_before  # nothing was enqueued for the refused request
        assert wait_finished(stack.url, long_id) == "succeeded"
    finally:
        shedding.stop()
