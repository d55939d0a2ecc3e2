"""Continuous batching in the llama.cpp engine: the real policy service, the real SmolLM2.

Requests in flight share one decode loop: they all complete, one can be cancelled while the
others keep decoding, a request alone gives the same outputs as the serialized engine (both
started in the same run, on this host: outputs recorded on another build would differ by its
floating-point path), and a prompt that shares a prefix with a cached one decodes only the new
part.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy, start_policy
from tests.helpers.prompts import COUNTING_PROMPT

pytestmark = pytest.mark.e2e

#: greedy and sampled cases (question, n, seeds, temperature, top_p, max_tokens); a repeated
#: seed in one call must give the same candidate twice
ALONE_CASES = [
    ("Name three colours of the rainbow.", 1, [1], 0.0, 1.0, 32),
    ("Name three colours of the rainbow.", 4, [11, 11, 12, 13], 1.0, 1.0, 24),
    ("Write a haiku about the sea.", 2, [5, 6], 0.8, 0.9, 24),
    ("What is 17 plus 25? Answer briefly.", 3, [21, 22, 23], 0.7, 1.0, 20),
]
PROMPTS = [
    "Name three colours of the rainbow.",
    "Write a haiku about the sea.",
    "What is 17 plus 25? Answer briefly.",
    "Explain gravity to a child.",
    "List two prime numbers.",
    "Why is the sky blue?",
    "Give me a synonym for happy.",
    "What is the capital of Spain?",
]


def started(port: int, **env: str) -> ServiceProcess:
    """The policy on SmolLM2 with extra settings ``env``, healthy."""
    proc = start_policy("smollm2-135m", port, None, **env)
    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=180)
    except BaseException:
        proc.stop()
        raise
    return proc


@pytest.fixture(scope="module")
def stub() -> Iterator[policy_pb2_grpc.PolicyStub]:
    port = free_port()
    proc = started(port)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield policy_pb2_grpc.PolicyStub(channel)
    finally:
        proc.stop()


def request(question: str, **sampling: Any) -> policy_pb2.GenerateRequest:
    return policy_pb2.GenerateRequest(
        input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=question)]),
        sampling=policy_pb2.SamplingParams(**sampling),
    )


def counting(n: int, max_tokens: int) -> policy_pb2.GenerateRequest:
    """A request that decodes all of its ``max_tokens``, however fast the host: a raw counting
    prompt, decoded greedily, continues the sequence instead of ending it."""
    return policy_pb2.GenerateRequest(
        input=policy_pb2.PromptInput(prompt=COUNTING_PROMPT),
        sampling=policy_pb2.SamplingParams(n=n, max_tokens=max_tokens, temperature=0.0),
    )


def running(stub: policy_pb2_grpc.PolicyStub) -> int:
    return int(stub.GetStats(policy_pb2.StatsRequest(), timeout=5).running_requests)


def idle(stub: policy_pb2_grpc.PolicyStub, within_s: float = 30.0) -> policy_pb2.EngineStats:
    deadline = time.monotonic() + within_s
    while True:
        stats: policy_pb2.EngineStats = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
        if (stats.running_requests == 0 and stats.waiting_requests == 0) or time.monotonic() > deadline:
            return stats
        time.sleep(0.05)


def outputs(stub: policy_pb2_grpc.PolicyStub, case: tuple[str, int, list[int], float, float, int]) -> list[Any]:
    question, n, seeds, temperature, top_p, max_tokens = case
    reply = stub.Generate(
        request(question, n=n, seeds=seeds, temperature=temperature, top_p=top_p, max_tokens=max_tokens), timeout=600
    )
    return [(c.seed, c.text, c.completion_tokens, c.finish_reason) for c in reply.candidates]


def test_a_request_alone_gives_the_serialized_engines_outputs() -> None:
    """The batching engine and the serialized one (``parallel_requests`` 1), both started here
    on the same model and host, answer each request alone with the same candidates per seed,
    with their prompt caches cold (first pass) and warm (second pass)."""
    ports = {"serialized": free_port(), "batched": free_port()}
    procs = [started(ports["serialized"], TTC_POLICY_PARALLEL_REQUESTS="1"), started(ports["batched"])]
    try:
        seen: dict[str, list[list[Any]]] = {}
        for name, port in ports.items():
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                engine = policy_pb2_grpc.PolicyStub(channel)
                seen[name] = [outputs(engine, case) for _ in range(2) for case in ALONE_CASES]
    finally:
        for proc in procs:
            proc.stop()
    serialized, batched = seen["serialized"], seen["batched"]
    for case, one, other in zip(ALONE_CASES * 2, serialized, batched, strict=True):
        assert other == one, case[0]
        assert all(tokens <= case[5] for _, _, tokens, _ in one), one
    assert serialized[: len(ALONE_CASES)] == serialized[len(ALONE_CASES) :]  # cold cache = warm cache
    sampled = serialized[1]  # seeds 11, 11, 12, 13: one seed, one candidate
    assert sampled[0][1:] == sampled[1][1:]


def test_concurrent_requests_all_complete_in_one_batch(stub: policy_pb2_grpc.PolicyStub) -> None:
    alone = {
        q: stub.Generate(request(q, n=1, max_tokens=24, temperature=0.0, logprobs=True), timeout=600).candidates[0]
        for q in PROMPTS[:4]
    }
    # The module's engine has served requests one at a time so far: its widest step is one request.
    assert stub.GetStats(policy_pb2.StatsRequest(), timeout=5).peak_batch_requests == 1
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        futures = [
            pool.submit(stub.Generate, request(q, n=1, max_tokens=24, temperature=0.0, logprobs=True), timeout=600)
            for q in PROMPTS
        ]
        replies = [f.result() for f in futures]
    # The engine's own record of its widest decode step, not a state caught by polling.
    assert stub.GetStats(policy_pb2.StatsRequest(), timeout=5).peak_batch_requests >= 2, "never decoded together"
    for q, reply in zip(PROMPTS, replies, strict=True):
        (c,) = reply.candidates
        assert c.text and 1 <= c.completion_tokens <= 24
        assert c.finish_reason in (policy_pb2.FINISH_REASON_STOP, policy_pb2.FINISH_REASON_LENGTH)
        assert len(c.logprobs) == c.completion_tokens
        if q in alone:
            # Batched with others a token may run through ggml's large-batch kernels, whose
            # rounding differs (docs/policy-engines.md): greedy tokens agree while the
            # log-probabilities stay within the stated tolerance, up to a near-tie.
            for a, b in zip(alone[q].logprobs, c.logprobs, strict=False):
                assert abs(a.logprob - b.logprob) <= 1.0
                if a.token_id != b.token_id:
                    break
    stats = idle(stub)
    assert stats.running_requests == 0 and stats.kv_cache_utilization == 0.0


def test_cancelling_one_request_leaves_the_others_decoding(stub: policy_pb2_grpc.PolicyStub) -> None:
    # Both decode all their tokens: the long one is still decoding when it is cancelled, a few
    # polls after it started, and the short one ends only at its max_tokens.
    long_call = stub.Generate.future(counting(n=2, max_tokens=1500), timeout=600)
    deadline = time.monotonic() + 60
    while running(stub) < 1:
        assert time.monotonic() < deadline, "the long request never started"
        time.sleep(0.02)
    short_call = stub.Generate.future(counting(n=1, max_tokens=48), timeout=600)
    while not short_call.done() and running(stub) < 2:  # decoding beside it (or done already)
        assert time.monotonic() < deadline, "the short request never started"
        time.sleep(0.02)
    long_call.cancel()
    short = short_call.result()
    assert short.candidates[0].completion_tokens == 48
    assert short.candidates[0].finish_reason == policy_pb2.FINISH_REASON_LENGTH
    with pytest.raises(grpc.FutureCancelledError):
        long_call.result()
    stats = idle(stub)
    assert stats.running_requests == 0 and stats.kv_cache_utilization == 0.0


def test_a_shared_prefix_is_decoded_once(stub: policy_pb2_grpc.PolicyStub) -> None:
    system = "You are a careful assistant. " * 20
    first = policy_pb2.PromptInput(
        messages=[
            common_pb2.ChatMessage(role="system", content=system),
            common_pb2.ChatMessage(role="user", content="Say hello."),
        ]
    )
    second = policy_pb2.PromptInput(
        messages=[
            common_pb2.ChatMessage(role="system", content=system),
            common_pb2.ChatMessage(role="user", content="Say goodbye."),
        ]
    )
    sampling = policy_pb2.SamplingParams(n=1, max_tokens=4, temperature=0.0)
    before = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
    a = stub.Generate(policy_pb2.GenerateRequest(input=first, sampling=sampling), timeout=600)
    b = stub.Generate(policy_pb2.GenerateRequest(input=second, sampling=sampling), timeout=600)
    after = stub.GetStats(policy_pb2.StatsRequest(), timeout=5)
    assert b.usage.cached_tokens >= 100  # the system prompt came from the first request's cells
    assert b.usage.cached_tokens < b.usage.prompt_tokens
    assert after.prefix_cache_hits - before.prefix_cache_hits == a.usage.cached_tokens + b.usage.cached_tokens
    assert after.prefix_cache_queries - before.prefix_cache_queries == a.usage.prompt_tokens + b.usage.prompt_tokens


def test_requests_beyond_the_parallel_limit_wait_and_the_gauge_shows_it() -> None:
    """``ttc_policy_requests_waiting`` (the autoscaler's signal) moves when requests queue."""
    import httpx

    port, metrics_port = free_port(), free_port()
    proc = start_policy(
        "smollm2-135m", port, metrics_port, TTC_POLICY_PARALLEL_REQUESTS="1", TTC_POLICY_STATS_INTERVAL_S="0.1"
    )

    def waiting_gauge() -> float:
        for line in httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text.splitlines():
            if line.startswith("ttc_policy_requests_waiting{"):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=180)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = policy_pb2_grpc.PolicyStub(channel)
            # The one slot is held by a request that decodes until it is cancelled (it cannot end
            # before its 1500 tokens): the three after it wait, however fast this host decodes.
            holder = stub.Generate.future(counting(n=1, max_tokens=1500), timeout=300)
            deadline = time.monotonic() + 60
            while running(stub) < 1:
                assert time.monotonic() < deadline, "the first request never started"
                time.sleep(0.02)
            with ThreadPoolExecutor(3) as pool:
                calls = [
                    pool.submit(stub.Generate, request(q, n=1, max_tokens=48, temperature=0.0), timeout=300)
                    for q in PROMPTS[:3]
                ]
                try:
                    while waiting_gauge() < 1:
                        assert time.monotonic() < deadline, "requests beyond the parallel limit never showed as waiting"
                        time.sleep(0.05)
                finally:
                    holder.cancel()
                replies = [c.result() for c in calls]
            assert all(r.candidates[0].text for r in replies)
            assert idle(stub).waiting_requests == 0
    finally:
        proc.stop()
