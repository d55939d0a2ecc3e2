"""The policy's start-up engine self-check with the real llama.cpp engine and SmolLM2, as separate
processes: an engine that dies at its first decode (the child killed with SIGILL through the
test-only hook ``TTC_POLICY_SELF_CHECK_FAULT``, as a library built for another CPU would be)
never reports ready, exits 3 and logs one line naming the signal and the rebuild; under
``ttc stack`` that line is what the stack prints when it stops. A normal start becomes ready and
serves, and with the check switched off the hook (read only by the check's child) does nothing."""

from __future__ import annotations

import re
import time

import grpc
import pytest

from loadtests.chaos_stack import LocalStack
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from services.policy.engine_check import EXIT_ENGINE_BROKEN, FAULT_ENV
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy, start_policy

pytestmark = pytest.mark.e2e

MODEL = "smollm2-135m"
REBUILD = "rm .venv/.engine-portable && make install"


def _exit_without_ever_serving(proc: ServiceProcess, target: str, timeout: float = 180) -> int:
    """Poll the health check until the process exits; fail if it ever says SERVING."""
    assert proc.proc is not None
    deadline = time.monotonic() + timeout
    while proc.proc.poll() is None:
        assert not grpc_healthy(target), f"a broken engine reported SERVING:\n{proc.log()}"
        assert time.monotonic() < deadline, f"the policy neither served nor exited:\n{proc.log()}"
        time.sleep(0.2)
    return proc.proc.returncode


def _self_check_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "engine self-check" in line]


def _generate(target: str) -> policy_pb2.GenerateResponse:
    with grpc.insecure_channel(target) as channel:
        request = policy_pb2.GenerateRequest(
            input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content="What is 2 + 2?")]),
            sampling=policy_pb2.SamplingParams(n=1, max_tokens=4),
        )
        reply: policy_pb2.GenerateResponse = policy_pb2_grpc.PolicyStub(channel).Generate(request, timeout=120)
        return reply


def test_an_engine_that_dies_at_its_first_decode_never_reports_ready() -> None:
    port = free_port()
    proc = start_policy(MODEL, port, None, **{FAULT_ENV: "SIGILL"})
    try:
        code = _exit_without_ever_serving(proc, f"127.0.0.1:{port}")
    finally:
        proc.stop()
    log = proc.log()
    assert code == EXIT_ENGINE_BROKEN, log
    [line] = _self_check_lines(log)
    assert "ERROR" in line
    assert "engine self-check died with SIGILL (illegal instruction)" in line
    assert "compiled for another CPU" in line and REBUILD in line
    assert "serving" not in log


def test_ttc_stack_stops_with_the_self_check_line() -> None:
    stack = LocalStack(model=MODEL, extra_env={FAULT_ENV: "SIGILL"})
    try:
        with pytest.raises(RuntimeError) as failed:
            stack.start(timeout=240)
    finally:
        stack.stop()
    assert stack.proc is not None and stack.proc.returncode == 1
    text = str(failed.value)
    assert f"policy exited ({EXIT_ENGINE_BROKEN}) while starting; last lines of .run/policy.log:" in text
    assert "engine self-check died with SIGILL (illegal instruction)" in text and REBUILD in text


def test_a_working_engine_passes_its_self_check_and_serves() -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    started = time.monotonic()
    proc = start_policy(MODEL, port)
    try:
        proc.wait_until(lambda: grpc_healthy(target), timeout=180)
        ready_s = time.monotonic() - started
        reply = _generate(target)
    finally:
        proc.stop()
    [line] = _self_check_lines(proc.log())
    assert re.search(r"engine self-check passed: [1-4] tokens decoded in \d+\.\ds", line), line
    assert reply.usage.completion_tokens >= 1
    print(f"ready after {ready_s:.1f}s, self-check: {line}")


def test_the_hook_acts_only_in_the_check_and_the_check_can_be_switched_off() -> None:
    port = free_port()
    target = f"127.0.0.1:{port}"
    proc = start_policy(MODEL, port, None, TTC_POLICY_ENGINE_SELF_CHECK="false", **{FAULT_ENV: "SIGILL"})
    try:
        proc.wait_until(lambda: grpc_healthy(target), timeout=180)
        reply = _generate(target)
    finally:
        proc.stop()
    assert reply.usage.completion_tokens >= 1
    assert _self_check_lines(proc.log()) == []
