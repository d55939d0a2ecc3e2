"""The Verifier gRPC surface in-process: validation before compute, cleaned scores, usage, outages."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from services.common.errors import error_field
from services.common.grpc_client import insecure_channel
from services.common.grpc_server import ServicerBinding, serve_grpc
from services.common.metrics import ServiceMetrics
from services.gen.ttc.v1 import common_pb2, sandbox_pb2, verifier_pb2, verifier_pb2_grpc
from services.verifier.clients import GrpcPolicyScorer, GrpcSandboxRunner
from services.verifier.metrics import VerifierMetrics
from services.verifier.registry import build_registry
from services.verifier.servicer import VerifierServicer
from services.verifier.settings import VerifierSettings
from services.verifier.types import PolicyScorer, SandboxRunner
from tests.helpers.processes import free_port
from tests.unit.verifier.scripted import ScriptedPolicy, ScriptedSandbox

PROBLEM = [common_pb2.ChatMessage(role="user", content="What is 6 * 7?")]


@dataclass
class Running:
    stub: verifier_pb2_grpc.VerifierStub
    metrics_port: int


async def _serve(policy: PolicyScorer, sandbox: SandboxRunner, **overrides: object) -> AsyncIterator[Running]:
    settings = VerifierSettings(port=free_port(), metrics_port=free_port(), max_candidates=8, **overrides)  # type: ignore[arg-type]
    metrics = ServiceMetrics("verifier", tokens_family=True)
    servicer = VerifierServicer(build_registry(settings, policy, sandbox), settings, VerifierMetrics(metrics))
    stop = asyncio.Event()
    task = asyncio.create_task(
        serve_grpc(
            [ServicerBinding(servicer, verifier_pb2_grpc.add_VerifierServicer_to_server, "ttc.v1.Verifier")],
            metrics=metrics,
            host="127.0.0.1",
            port=settings.port,
            metrics_port=settings.metrics_port,
            stop_event=stop,
            grace_seconds=0.1,
        )
    )
    target = f"127.0.0.1:{settings.port}"
    for _ in range(100):
        async with grpc.aio.insecure_channel(target) as ch:
            try:
                await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=0.5)
                break
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.05)
    async with insecure_channel(target) as channel:
        yield Running(verifier_pb2_grpc.VerifierStub(channel), settings.metrics_port)
    stop.set()
    await task


def yes_no(p_yes: float) -> ScriptedPolicy:
    return ScriptedPolicy(lambda p, c: math.log(p_yes) if c.endswith("Yes") else math.log(1 - p_yes))


@pytest.fixture
def policy() -> ScriptedPolicy:
    return yes_no(0.7)


@pytest.fixture
def sandbox() -> ScriptedSandbox:
    return ScriptedSandbox(lambda code, test: ("return a + b" in code, "EXEC_STATUS_OK", ""))


@pytest.fixture
async def verifier(policy: ScriptedPolicy, sandbox: ScriptedSandbox) -> AsyncIterator[Running]:
    async for running in _serve(policy, sandbox):
        yield running


async def invalid(stub: verifier_pb2_grpc.VerifierStub, request: verifier_pb2.VerifyRequest) -> tuple[str, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Verify(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    return error_field(err.value), err.value.details() or ""


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (verifier_pb2.VerifyRequest(verifier="oracle", candidates=["1"]), "verifier"),
        (verifier_pb2.VerifyRequest(verifier="math_equivalence", candidates=["1"]), "reference"),
        (verifier_pb2.VerifyRequest(verifier="math_equivalence", reference="1"), "candidates"),
        (verifier_pb2.VerifyRequest(verifier="math_equivalence", reference="1", candidates=["1"] * 9), "candidates"),
        (verifier_pb2.VerifyRequest(verifier="code_tests", candidates=["x"]), "code.tests"),
        (verifier_pb2.VerifyRequest(verifier="orm", candidates=["x"]), "problem"),
        (verifier_pb2.VerifyRequest(verifier="prm", problem=PROBLEM, candidates=["x"], aggregation=9), "aggregation"),  # type: ignore[arg-type]
        (verifier_pb2.VerifyRequest(verifier="format", candidates=["x"], format_pattern="(("), "format_pattern"),
        (verifier_pb2.VerifyRequest(verifier="ensemble", candidates=["x"]), "ensemble"),
        (
            verifier_pb2.VerifyRequest(
                verifier="ensemble",
                candidates=["x"],
                problem=PROBLEM,
                ensemble=[verifier_pb2.WeightedVerifier(name="orm", weight=-1)],
            ),
            "ensemble[0].weight",
        ),
        (
            verifier_pb2.VerifyRequest(
                verifier="ensemble",
                candidates=["x"],
                problem=PROBLEM,
                ensemble=[
                    verifier_pb2.WeightedVerifier(name="orm", weight=1),
                    verifier_pb2.WeightedVerifier(name="math_equivalence", weight=1),
                ],
            ),
            "reference",
        ),
    ],
)
async def test_bad_input_names_the_field_and_spends_nothing(
    verifier: Running,
    policy: ScriptedPolicy,
    sandbox: ScriptedSandbox,
    request_: verifier_pb2.VerifyRequest,
    field: str,
) -> None:
    got, details = await invalid(verifier.stub, request_)
    assert got == field, details
    assert policy.calls == [] and sandbox.calls == []


async def test_math_equivalence_fraction_vs_decimal(verifier: Running) -> None:
    reply = await verifier.stub.Verify(
        verifier_pb2.VerifyRequest(
            verifier="math_equivalence", reference="\\frac{1}{2}", candidates=["\\boxed{0.5}", "The answer is 0.25"]
        )
    )
    assert [v.passed for v in reply.verdicts] == [True, False]
    assert reply.usage.prompt_tokens == 0


async def test_orm_usage_and_metrics(verifier: Running, policy: ScriptedPolicy) -> None:
    reply = await verifier.stub.Verify(
        verifier_pb2.VerifyRequest(verifier="orm", problem=PROBLEM, candidates=["42", "41", "\\boxed{42}"])
    )
    assert [v.score for v in reply.verdicts] == pytest.approx([0.7] * 3)
    # What the judge's engine prefilled is prompt tokens; it generated nothing.
    assert reply.usage.prompt_tokens == 3 * (10 + 2 * 3) and reply.usage.completion_tokens == 0
    text = httpx.get(f"http://127.0.0.1:{verifier.metrics_port}/metrics").text
    assert 'ttc_verifier_candidates_total{outcome="passed",verifier="orm"} 3.0' in text
    assert 'ttc_verifier_policy_calls_total{verifier="orm"} 3.0' in text
    assert 'ttc_tokens_total{kind="prompt",model="default",service="verifier"} 48.0' in text
    assert 'kind="generated"' not in text  # a Score-based judge generates nothing


async def test_list_verifiers(verifier: Running) -> None:
    reply = await verifier.stub.ListVerifiers(verifier_pb2.ListVerifiersRequest())
    info = {v.name: v for v in reply.verifiers}
    assert set(info) == {"math_equivalence", "format", "code_tests", "orm", "prm", "ensemble"}
    assert info["math_equivalence"].needs_reference and info["code_tests"].needs_code and info["prm"].generative


async def test_out_of_range_scores_leave_the_service_clamped() -> None:
    wild = ScriptedPolicy(lambda p, c: math.nan)
    async for running in _serve(wild, ScriptedSandbox(lambda c, t: (True, "EXEC_STATUS_OK", ""))):
        reply = await running.stub.Verify(
            verifier_pb2.VerifyRequest(verifier="prm", problem=PROBLEM, candidates=["Step 1: a\nStep 2: b"])
        )
        (v,) = reply.verdicts
        assert v.score == 0.0 and list(v.step_scores) == [0.0, 0.0] and not v.passed


async def test_policy_down_is_unavailable_with_a_clear_message() -> None:
    dead = f"127.0.0.1:{free_port()}"
    policy = GrpcPolicyScorer(dead, timeout_s=5.0)
    sandbox = GrpcSandboxRunner(dead, timeout_s=5.0)
    try:
        async for running in _serve(policy, sandbox):
            for verifier in ("orm", "prm"):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await running.stub.Verify(
                        verifier_pb2.VerifyRequest(verifier=verifier, problem=PROBLEM, candidates=["a", "b"])
                    )
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE
                assert f"policy service at {dead} is unavailable" in (err.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await running.stub.Verify(
                    verifier_pb2.VerifyRequest(
                        verifier="code_tests",
                        candidates=["print(1)"],
                        code=verifier_pb2.CodeSpec(tests=[sandbox_pb2.TestCase(name="t", expected_stdout=b"1\n")]),
                    )
                )
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            assert f"sandbox service at {dead} is unavailable" in (err.value.details() or "")
    finally:
        await policy.close()
        await sandbox.close()
