"""The generative verifiers as real processes: verifier + policy (SmolLM2 on llama.cpp).

SmolLM2-135M is no judge of arithmetic, so these tests check the plumbing, not accuracy:
probabilities in [0, 1] for several candidates in one call, the tokens spent reported, the
PRM's prefixes of all candidates sent in one batched Score call, and an ensemble.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy

pytestmark = pytest.mark.e2e

PROBLEM = [common_pb2.ChatMessage(role="user", content="Tom has 3 boxes of 4 apples. How many apples does he have?")]
CANDIDATES = [
    "Step 1: Each box has 4 apples.\nStep 2: 3 boxes times 4 apples is 12.\nStep 3: The answer is \\boxed{12}.",
    "Step 1: Each box has 4 apples.\nStep 2: 3 plus 4 is 7.\nStep 3: The answer is \\boxed{7}.",
    "He has 3 boxes.\n\nEach holds 4, so 3 * 4 = 12 apples.\n\nThe answer is 12.",
]


@dataclass
class Stack:
    verifier: str
    metrics_url: str
    shared_verifier: str  # the same, with TTC_VERIFIER_PRM_MODE=shared_prompt
    shared_metrics_url: str


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    policy_port = free_port()
    policy = ServiceProcess(
        "policy",
        env={
            "TTC_POLICY_HOST": "127.0.0.1",
            "TTC_POLICY_PORT": str(policy_port),
            "TTC_POLICY_METRICS_PORT": str(free_port()),
            "TTC_POLICY_ENGINE": "llamacpp",
            "TTC_POLICY_MODEL": "smollm2-135m",
            "TTC_POLICY_N_CTX": "2048",
            "TTC_POLICY_N_THREADS": "2",
        },
    ).start()
    verifiers = []
    for mode in ("prefix_prompts", "shared_prompt"):
        port, metrics = free_port(), free_port()
        process = ServiceProcess(
            "verifier",
            env={
                "TTC_VERIFIER_PORT": str(port),
                "TTC_VERIFIER_METRICS_PORT": str(metrics),
                "TTC_VERIFIER_POLICY_TARGET": f"127.0.0.1:{policy_port}",
                "TTC_VERIFIER_PRM_MODE": mode,
            },
        ).start()
        verifiers.append((process, f"127.0.0.1:{port}", f"http://127.0.0.1:{metrics}/metrics"))
    try:
        policy.wait_until(lambda: grpc_healthy(f"127.0.0.1:{policy_port}"), 180)
        for process, target, _ in verifiers:
            process.wait_until(functools.partial(grpc_healthy, target), 60)
        (_, target, metrics_url), (_, shared, shared_metrics) = verifiers
        yield Stack(target, metrics_url, shared, shared_metrics)
    finally:
        for process, _, _ in verifiers:
            process.stop()
        policy.stop()


@pytest.fixture
async def stub(stack: Stack) -> AsyncIterator[verifier_pb2_grpc.VerifierStub]:
    async with insecure_channel(stack.verifier) as channel:
        yield verifier_pb2_grpc.VerifierStub(channel)


def metric(text: str, name: str, labels: str) -> float:
    match = re.search(rf"^{name}{{{re.escape(labels)}}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def assert_probabilities(reply: verifier_pb2.VerifyResponse) -> None:
    assert len(reply.verdicts) == len(CANDIDATES)
    for v in reply.verdicts:
        assert not v.error, v.error
        assert 0.0 <= v.score <= 1.0
        assert v.passed == (v.score >= 0.5)
    assert reply.usage.prompt_tokens > 0


async def test_orm_scores_several_candidates_in_one_call(stack: Stack, stub: verifier_pb2_grpc.VerifierStub) -> None:
    request = verifier_pb2.VerifyRequest(verifier="orm", problem=PROBLEM, candidates=CANDIDATES)
    reply = await stub.Verify(request)
    assert_probabilities(reply)
    assert [v.extracted_answer for v in reply.verdicts] == ["12", "7", "12"]
    assert len({round(v.score, 6) for v in reply.verdicts}) > 1, "the judge saw no difference between candidates"
    # The same call spends the same tokens. (Its scores may move in the 2nd decimal: llama.cpp's
    # logits depend on how much of a prompt came from the prefix cache.)
    again = await stub.Verify(request)
    assert again.usage.prompt_tokens == reply.usage.prompt_tokens
    assert all(0.0 <= v.score <= 1.0 for v in again.verdicts)


async def prm(target: str, metrics_url: str) -> tuple[dict[str, verifier_pb2.VerifyResponse], float]:
    """min and mean PRM verdicts of the candidates, and the policy calls the two Verify calls made."""
    before = metric(httpx.get(metrics_url).text, "ttc_verifier_policy_calls_total", 'verifier="prm"')
    replies = {}
    async with insecure_channel(target) as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        for name, aggregation in (
            ("min", verifier_pb2.STEP_AGGREGATION_MIN),
            ("mean", verifier_pb2.STEP_AGGREGATION_MEAN),
        ):
            replies[name] = await stub.Verify(
                verifier_pb2.VerifyRequest(
                    verifier="prm", problem=PROBLEM, candidates=CANDIDATES, aggregation=aggregation
                )
            )
            assert_probabilities(replies[name])
    after = metric(httpx.get(metrics_url).text, "ttc_verifier_policy_calls_total", 'verifier="prm"')
    for low, mean in zip(replies["min"].verdicts, replies["mean"].verdicts, strict=True):
        assert len(low.step_scores) == 3
        assert all(0.0 <= s <= 1.0 for s in low.step_scores)
        assert low.score == pytest.approx(min(low.step_scores), abs=1e-9)
        assert mean.score == pytest.approx(sum(mean.step_scores) / 3, abs=1e-6)
    return replies, after - before


async def test_prm_both_call_shapes_score_every_step_alike(stack: Stack) -> None:
    prefix, prefix_calls = await prm(stack.verifier, stack.metrics_url)
    shared, shared_calls = await prm(stack.shared_verifier, stack.shared_metrics_url)
    assert prefix_calls == 2 * 9, "prefix_prompts: one Score call per prefix (3 candidates x 3 steps)"
    assert shared_calls == 2, "shared_prompt: all 9 prefixes of the 3 candidates in one Score call per Verify"
    # The same probability asked two ways (the shared text cancels): equal up to tokenization and numerics.
    for a, b in zip(prefix["min"].verdicts, shared["min"].verdicts, strict=True):
        assert list(a.step_scores) == pytest.approx(list(b.step_scores), abs=0.1)


async def test_ensemble_of_rule_and_judge(stub: verifier_pb2_grpc.VerifierStub) -> None:
    reply = await stub.Verify(
        verifier_pb2.VerifyRequest(
            verifier="ensemble",
            problem=PROBLEM,
            candidates=CANDIDATES,
            reference="12",
            ensemble=[
                verifier_pb2.WeightedVerifier(name="math_equivalence", weight=3.0),
                verifier_pb2.WeightedVerifier(name="orm", weight=1.0),
            ],
        )
    )
    assert_probabilities(reply)
    right, wrong, right_too = reply.verdicts
    # the rule verifier's weight dominates: a right answer scores at least 3/4, a wrong one at most 1/4
    assert right.score >= 0.75 and right_too.score >= 0.75 and wrong.score <= 0.25
