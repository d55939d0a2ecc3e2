"""The policy service on the real vLLM engine (CPU build) and SmolLM2 converted from its GGUF.

One service process for the module: the engine core takes tens of seconds to start on CPU
(minutes on a loaded 2-core machine), so the tests share it and stay few.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e import policy_tool_checks as tool_checks
from tests.helpers.processes import ROOT, ServiceProcess, free_port, grpc_healthy
from tests.helpers.prompts import COUNTING_PROMPT

pytestmark = [pytest.mark.e2e, pytest.mark.vllm, pytest.mark.slow]

MODEL = "smollm2-135m"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[policy_pb2_grpc.PolicyStub, str]]:
    """The policy on vLLM, and the URL of its /metrics."""
    from services.policy.models import prepare

    models_dir = ROOT / "models"
    prepare(MODEL, models_dir, vllm=True)  # converts once; later runs keep the checkpoint
    port, metrics_port = free_port(), free_port()
    proc = ServiceProcess(
        "policy",
        env={
            "TTC_POLICY_ENGINE": "vllm",
            "TTC_POLICY_MODEL": MODEL,
            "TTC_POLICY_MODELS_DIR": str(Path(models_dir)),
            "TTC_POLICY_VLLM_MAX_MODEL_LEN": "4096",
            "TTC_POLICY_VLLM_KV_CACHE_GIB": "1",
            "TTC_POLICY_HOST": "127.0.0.1",
            "TTC_POLICY_PORT": str(port),
            "TTC_POLICY_METRICS_PORT": str(metrics_port),
        },
    ).start()
    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=900)
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield policy_pb2_grpc.PolicyStub(channel), f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        proc.stop(timeout=30)


@pytest.fixture(scope="module")
def policy(served: tuple[policy_pb2_grpc.PolicyStub, str]) -> policy_pb2_grpc.PolicyStub:
    return served[0]


def counter(url: str, name: str, **labels: str) -> float:
    """A sample of the policy's /metrics (0 when absent)."""
    import httpx
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(httpx.get(url, timeout=10).text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def chat(text: str) -> policy_pb2.PromptInput:
    return policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=text)])


def stats(stub: policy_pb2_grpc.PolicyStub) -> policy_pb2.EngineStats:
    reply: policy_pb2.EngineStats = stub.GetStats(policy_pb2.StatsRequest(), timeout=10)
    return reply


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_n4_generation_and_engine_stats(policy: policy_pb2_grpc.PolicyStub) -> None:
    before = stats(policy)
    assert before.engine == "vllm" and before.model == MODEL and before.max_context == 4096
    request = policy_pb2.GenerateRequest(
        input=chat("Name three colours of the rainbow."),
        sampling=policy_pb2.SamplingParams(n=4, base_seed=7, max_tokens=24, temperature=0.9, logprobs=True),
    )
    reply = policy.Generate(request, timeout=600)
    assert [c.index for c in reply.candidates] == [0, 1, 2, 3]
    assert len({c.seed for c in reply.candidates}) == 4
    for c in reply.candidates:
        assert c.text and 0 < c.completion_tokens <= 24
        assert len(c.logprobs) == c.completion_tokens
        assert c.finish_reason in (policy_pb2.FINISH_REASON_STOP, policy_pb2.FINISH_REASON_LENGTH)
    assert reply.usage.completion_tokens == sum(c.completion_tokens for c in reply.candidates)
    tokenized = policy.Tokenize(policy_pb2.TokenizeRequest(input=request.input), timeout=30)
    assert reply.usage.prompt_tokens == tokenized.count > 10
    # The same seeds give the same candidates: per-candidate sampling is seeded. Compared between
    # two runs that both read the prompt from the prefix cache (a cold prefill rounds differently).
    # Even then vLLM's CPU kernels are not batch-invariant: the four children of an n=4 request
    # can be prefilled and scheduled differently from run to run, and the last bits that moves
    # flip a near-tie sample now and then (CI once: one candidate of four, mid-text). So three of
    # four must match whole; unseeded sampling at temperature 0.9 would match none (24 tokens),
    # so this still fails when seeds are not honoured.
    again = [c.text for c in policy.Generate(request, timeout=600).candidates]
    third = [c.text for c in policy.Generate(request, timeout=600).candidates]
    assert sum(a == b for a, b in zip(again, third, strict=True)) >= 3, (again, third)

    after = stats(policy)
    assert 0.0 <= after.kv_cache_utilization <= 1.0
    # the scheduler's prefix-cache counters saw the prompts of these twelve engine requests
    assert after.prefix_cache_queries >= before.prefix_cache_queries + 12 * reply.usage.prompt_tokens


def test_deadline_aborts_the_engine_request(served: tuple[policy_pb2_grpc.PolicyStub, str]) -> None:
    policy, metrics = served
    aborted = counter(metrics, "ttc_policy_aborted_tokens_total", reason="deadline")
    # A raw counting prompt: greedy decoding continues the sequence instead of ending it, so
    # 4 x 3000 tokens cannot finish inside the deadline even on a fast, idle machine.
    request = policy_pb2.GenerateRequest(
        input=policy_pb2.PromptInput(prompt=COUNTING_PROMPT),
        sampling=policy_pb2.SamplingParams(n=4, max_tokens=3000, temperature=0.0),
    )
    outcome: list[grpc.StatusCode] = []

    def call() -> None:
        try:
            policy.Generate(request, timeout=8)
            outcome.append(grpc.StatusCode.OK)
        except grpc.RpcError as err:
            outcome.append(err.code())

    caller = threading.Thread(target=call)
    caller.start()
    # while it decodes, the engine reports four running sequences holding KV-cache blocks
    assert wait_for(lambda: (s := stats(policy)).running_requests == 4 and s.kv_cache_utilization > 0, 8)
    caller.join(60)
    assert outcome == [grpc.StatusCode.DEADLINE_EXCEEDED]
    # 3000 tokens each are far from done: only an abort empties the scheduler this soon
    assert wait_for(lambda: (s := stats(policy)).running_requests == 0 and s.waiting_requests == 0, 5)
    assert stats(policy).kv_cache_utilization < 0.01
    # the tokens decoded before the abort are counted (delta outputs): some, far from 4 x 3000
    decoded = counter(metrics, "ttc_policy_aborted_tokens_total", reason="deadline") - aborted
    assert 0 < decoded < 12_000, decoded


def test_score_prefers_the_likely_continuation(policy: policy_pb2_grpc.PolicyStub) -> None:
    reply = policy.Score(
        policy_pb2.ScoreRequest(
            input=policy_pb2.PromptInput(prompt="The capital of France is"),
            continuations=[" Paris", " a banana"],
            top_logprobs=3,
        ),
        timeout=300,
    )
    paris, banana = reply.scores
    assert len(paris.tokens) == 1 and len(banana.tokens) == 2
    assert paris.total_logprob > banana.total_logprob
    assert paris.tokens[0].top_logprobs[0].logprob >= paris.tokens[0].logprob


def test_seeded_candidates_of_a_prompt_longer_than_a_default_step(policy: policy_pb2_grpc.PolicyStub) -> None:
    """vLLM's default CPU step budget is 2048 tokens; a longer prompt used to be prefilled in
    chunks, and chunked prefill of a seeded request killed the CPU engine core."""
    facts = " ".join(f"Fact {i}: {i} squared is {i * i}." for i in range(130))
    inp = policy_pb2.PromptInput(prompt=facts + " Which fact is about 7?")
    assert policy.Tokenize(policy_pb2.TokenizeRequest(input=inp), timeout=30).count > 2048
    request = policy_pb2.GenerateRequest(
        input=inp, sampling=policy_pb2.SamplingParams(n=2, seeds=[5, 77], max_tokens=8, temperature=0.8)
    )
    reply = policy.Generate(request, timeout=600)
    assert [c.completion_tokens > 0 for c in reply.candidates] == [True, True]
    assert stats(policy).running_requests == 0


def test_structured_outputs_and_tools(policy: policy_pb2_grpc.PolicyStub) -> None:
    """vLLM structured outputs: every json_schema candidate validates (logprobs too); SmolLM2's
    template has no tools, so they render the Hermes way and the grammar forces valid calls;
    a tool round trip renders and generates; bad schemas are INVALID_ARGUMENT."""
    tool_checks.check_json_schema(policy)
    tool_checks.check_json_object(policy)
    tool_checks.check_required_tool(policy)
    tool_checks.check_named_tool(policy)
    tool_checks.check_round_trip(policy)
    tool_checks.check_stream_holds_back_calls(policy)
    tool_checks.check_bad_input(policy)
