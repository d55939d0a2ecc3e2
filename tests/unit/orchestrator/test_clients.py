"""The gRPC adapters against in-process fake services (real gRPC on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from services.common.grpc_client import insecure_channel
from services.gen.ttc.v1 import (
    common_pb2,
    orchestrator_pb2,
    policy_pb2,
    policy_pb2_grpc,
    verifier_pb2,
    verifier_pb2_grpc,
)
from services.orchestrator.clients import GrpcPolicy, GrpcVerifier
from services.search.interfaces import GenerateCall, Message, VerifyCall
from services.search.run import run_search
from tests.helpers.search_jobs import make_job


class FakePolicy(policy_pb2_grpc.PolicyServicer):
    def __init__(self) -> None:
        self.requests: list[policy_pb2.GenerateRequest] = []
        self.fail_after = 10**9

    async def Generate(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        if len(self.requests) > self.fail_after:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "engine restarting")
        n = request.sampling.n
        return policy_pb2.GenerateResponse(
            candidates=[
                policy_pb2.Candidate(
                    index=i,
                    text=f"Step.\n\nThe answer is {42 if i == 0 else 41}.",
                    finish_reason=policy_pb2.FINISH_REASON_STOP,
                    completion_tokens=7,
                    seed=request.sampling.seeds[i],
                    logprobs=[common_pb2.TokenLogprob(token="a", logprob=-0.25)],
                )
                for i in range(n)
            ],
            usage=common_pb2.Usage(prompt_tokens=11, completion_tokens=7 * n, cached_tokens=3),
        )


class FakeVerifier(verifier_pb2_grpc.VerifierServicer):
    def __init__(self) -> None:
        self.requests: list[verifier_pb2.VerifyRequest] = []
        self.never_pass = False

    async def Verify(self, request, context):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return verifier_pb2.VerifyResponse(
            verdicts=[
                verifier_pb2.CandidateVerdict(
                    score=0.9 if "42" in c else 0.1, passed="42" in c and not self.never_pass, feedback="ok"
                )
                for c in request.candidates
            ],
            usage=common_pb2.Usage(prompt_tokens=5, completion_tokens=1, cached_tokens=2),
        )


@pytest.fixture
async def services() -> AsyncIterator[tuple[FakePolicy, FakeVerifier, str]]:
    server = grpc.aio.server()
    policy, verifier = FakePolicy(), FakeVerifier()
    policy_pb2_grpc.add_PolicyServicer_to_server(policy, server)
    verifier_pb2_grpc.add_VerifierServicer_to_server(verifier, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield policy, verifier, f"127.0.0.1:{port}"
    finally:
        await server.stop(None)


async def test_adapters_map_requests_and_responses(services: tuple[FakePolicy, FakeVerifier, str]) -> None:
    fake_policy, fake_verifier, target = services
    async with insecure_channel(target) as channel:
        job = make_job("best_of_n", n=3, verifier="prm", params={"aggregation": "product"})
        result, _ = await run_search(job, GrpcPolicy(channel, "qwen"), GrpcVerifier(channel, "qwen"))
    assert result.termination == orchestrator_pb2.TERMINATION_COMPLETED
    assert "answer is 42" in result.answer and result.verifier_score == pytest.approx(0.9)
    request = fake_policy.requests[0]
    assert request.model == "qwen" and request.sampling.n == 3 and len(request.sampling.seeds) == 3
    assert request.input.messages[0].content == "What is 6*7?"
    assert result.budget_used.generated_tokens == 21 and result.budget_used.cached_tokens == 3
    used = result.budget_used
    assert (used.verifier_prompt_tokens, used.verifier_cached_tokens, used.verifier_generated_tokens) == (5, 2, 1)
    vreq = fake_verifier.requests[0]
    assert vreq.verifier == "prm" and vreq.aggregation == verifier_pb2.STEP_AGGREGATION_PRODUCT


async def test_raw_prompt_and_code_spec(services: tuple[FakePolicy, FakeVerifier, str]) -> None:
    fake_policy, fake_verifier, target = services
    async with insecure_channel(target) as channel:
        await GrpcPolicy(channel).generate(GenerateCall((Message("raw", "1+1="),), n=1, seeds=(5,), max_tokens=4))
        await GrpcVerifier(channel).verify(
            VerifyCall(
                "code_tests", (Message("user", "f"),), ("code",), code={"tests": [{"name": "t1"}], "entryPoint": "f"}
            )
        )
    assert fake_policy.requests[0].input.prompt == "1+1=" and not fake_policy.requests[0].input.messages
    assert fake_verifier.requests[0].code.entry_point == "f"
    assert fake_verifier.requests[0].code.tests[0].name == "t1"


async def test_grpc_failure_mid_search_is_termination_error_with_best_so_far(
    services: tuple[FakePolicy, FakeVerifier, str],
) -> None:
    fake_policy, fake_verifier, target = services
    fake_policy.fail_after = 1
    fake_verifier.never_pass = True  # so the revision loop asks the policy again
    async with insecure_channel(target) as channel:
        job = make_job("revision", n=1, params={"rounds": 2})
        result, _ = await run_search(job, GrpcPolicy(channel), GrpcVerifier(channel))
    assert result.termination == orchestrator_pb2.TERMINATION_ERROR
    assert "UNAVAILABLE" in result.error and "engine restarting" in result.error
    assert "answer is 42" in result.answer
