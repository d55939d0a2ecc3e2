"""``ttc stack`` supervises its children: the orchestrator worker SIGKILLed under a real stack is
restarted (the restart logged), a request succeeds afterwards, and only a signal stops the stack,
which then stops every child."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest

from loadtests.chaos_stack import LocalStack

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    s = LocalStack(concurrency=2)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def _ask(stack: LocalStack) -> httpx.Response:
    body = {
        "model": stack.model,
        "messages": [{"role": "user", "content": "What is 2 + 2?"}],
        "max_tokens": 4,
        "reasoning_effort": "none",
    }
    return httpx.post(f"{stack.url}/v1/chat/completions", json=body, timeout=120)


def test_killed_worker_is_restarted_and_serves_again(stack: LocalStack) -> None:
    assert _ask(stack).status_code == 200
    old = stack.fault("orchestrator")  # SIGKILL
    assert stack.wait_restarted("orchestrator", old, timeout=60) < 30
    new = stack.pid("orchestrator")
    assert new != old and _alive(new)
    assert stack.proc is not None and stack.proc.poll() is None, "the stack must not stop when a child dies"
    log = stack.log()
    assert "orchestrator killed by SIGKILL (killed, -9); restarting in 1.0s" in log
    assert f"orchestrator restarted (pid {new}, restart 1)" in log
    deadline = time.monotonic() + 120
    reply = _ask(stack)
    while reply.status_code != 200 and time.monotonic() < deadline:
        time.sleep(1)
        reply = _ask(stack)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] is not None


def test_a_signal_stops_the_stack_and_every_child(stack: LocalStack) -> None:
    children = {name: stack.pid(name) for name in ("redis", "policy", "sandbox", "verifier", "orchestrator", "gateway")}
    assert all(_alive(pid) for pid in children.values())
    assert stack.proc is not None
    stack.proc.send_signal(signal.SIGTERM)
    assert stack.proc.wait(90) == 0
    assert "signal received; stopping every service" in stack.log()
    assert [name for name, pid in children.items() if _alive(pid)] == []
