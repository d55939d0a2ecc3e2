"""Program-of-thought end to end: the real gateway, worker, policy service on
Qwen2.5-Coder-0.5B (the model the effort ladder is calibrated on) and the real sandbox (bwrap).

The model writes a program, the sandbox runs it, the printed output is the answer. The worker
reaches the sandbox through a proxy in this test (``Boundary``), which forwards every call
unchanged until a test arms it with hostile programs (network, fork bomb, a write outside the
private tmp): the model will not write those, so they are put where its programs arrive, and
the real sandbox must contain them while the search answers from the program that behaved.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from services.common.answers import extract_answer, program_answer, vote_key
from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc
from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import RedisServer, free_port, start_sandbox
from tests.helpers.routing import shipped_routing

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"
SLOTS = 4


@pytest.fixture(scope="module")
def sandbox_target() -> Iterator[str]:
    sandbox = start_sandbox(90000 + (os.getpid() % 500) * 64, SLOTS)
    try:
        yield sandbox.target
    finally:
        sandbox.process.stop()


@dataclass(frozen=True)
class Run:
    """One program at the boundary: what the worker sent, what the sandbox ran, its outcome."""

    written: str
    executed: str
    response: sandbox_pb2.ExecuteResponse


class Boundary(sandbox_pb2_grpc.SandboxServicer):
    """The sandbox as the worker sees it: a proxy to the real one that records each program
    and, while armed, hands the real sandbox the next hostile program in place of the one the
    worker sent. Everything else (limits, request id, trace context) passes unchanged."""

    def __init__(self, target: str) -> None:
        self._channel = grpc.insecure_channel(target)
        self._sandbox = sandbox_pb2_grpc.SandboxStub(self._channel)
        self._lock = threading.Lock()
        self._hostile: list[str] = []
        self._runs: list[Run] = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=SLOTS * 2))
        sandbox_pb2_grpc.add_SandboxServicer_to_server(self, self.server)
        self.target = f"127.0.0.1:{free_port()}"
        self.server.add_insecure_port(self.target)

    def arm(self, programs: list[str]) -> None:
        with self._lock:
            self._hostile, self._runs = list(programs), []

    def runs(self) -> list[Run]:
        with self._lock:
            return list(self._runs)

    def Execute(
        self, request: sandbox_pb2.ExecuteRequest, context: grpc.ServicerContext
    ) -> sandbox_pb2.ExecuteResponse:
        with self._lock:
            hostile = self._hostile.pop(0) if self._hostile else None
        forwarded = sandbox_pb2.ExecuteRequest()
        forwarded.CopyFrom(request)
        if hostile is not None:
            forwarded.code = hostile
        metadata = [
            (k, v)
            for k, v in context.invocation_metadata()
            if isinstance(v, str) and not k.startswith((":", "grpc-")) and k != "user-agent"
        ]
        try:
            response: sandbox_pb2.ExecuteResponse = self._sandbox.Execute(
                forwarded, timeout=context.time_remaining(), metadata=metadata
            )
        except grpc.RpcError as err:
            context.abort(err.code(), err.details() or "")
        with self._lock:
            self._runs.append(Run(request.code, forwarded.code, response))
        return response


@pytest.fixture(scope="module")
def boundary(sandbox_target: str) -> Iterator[Boundary]:
    proxy = Boundary(sandbox_target)
    proxy.server.start()
    try:
        yield proxy
    finally:
        proxy.server.stop(grace=None)


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, boundary: Boundary) -> Iterator[GatewayStack]:
    s = GatewayStack(
        redis_server,
        worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": boundary.target},
        gateway_env=shipped_routing(),
    )
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()


def test_program_of_thought_answers_a_word_problem_through_the_gateway(stack: GatewayStack) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    question = "Tom has 3 boxes with 24 pencils each. He gives away 17 pencils. How many pencils does he have left?"
    response = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": question}],
        max_tokens=256,
        extra_body={"ttc": {"strategy": "program_of_thought", "n": 1}},
    )
    answer = response.choices[0].message.content or ""
    assert answer.rstrip().endswith("The answer is 55."), answer
    ttc: dict[str, Any] = response.model_extra["ttc"]  # type: ignore[index]
    trace = httpx.get(f"{stack.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()
    runs = [n for n in trace["nodes"] if n.get("execution")]
    assert runs and runs[0]["execution"]["status"] == "ok"
    assert runs[0]["execution"]["stdout"].strip() == "55"


def test_the_shipped_ladder_answers_the_readme_example(stack: GatewayStack) -> None:
    """The README's example on the embedded default and the table shipped for it: ``none`` is one
    greedy chain-of-thought sample, ``low`` routes the arithmetic question to a program."""
    from openai import OpenAI
    from openai.types.chat import ChatCompletionMessageParam

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "What is 17 + 25?"}]
    low = client.chat.completions.create(model=QWEN, messages=messages, reasoning_effort="low")
    ttc: dict[str, Any] = low.model_extra["ttc"]  # type: ignore[index]
    assert (ttc["task_type"], ttc["strategy"], ttc["effort_applied"]) == ("arithmetic", "program_of_thought", "low")
    # The greedy program, or (when the model answers in prose instead of code) the greedy
    # chain-of-thought fallback: either way the right number.
    assert extract_answer(low.choices[0].message.content or "") == "42"
    assert ttc["spend"]["probe"]["generated_tokens"] == 0  # the estimator generates nothing
    none = client.chat.completions.create(model=QWEN, messages=messages, reasoning_effort="none", max_tokens=128)
    assert none.model_extra["ttc"]["strategy"] == "single"  # type: ignore[index]
    assert none.model_extra["ttc"]["candidates_generated"] == 1  # type: ignore[index]


HOSTILE = {
    "network": "import socket\ns = socket.create_connection(('1.1.1.1', 80), timeout=2)\nprint(999)",
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "escape_write": "open('{target}', 'w').write('pwned')\nprint(999)",
}


STATUS = {v.number: v.name.removeprefix("EXEC_STATUS_").lower() for v in sandbox_pb2.ExecStatus.DESCRIPTOR.values}


def test_hostile_programs_are_contained_and_the_search_still_answers(stack: GatewayStack, boundary: Boundary) -> None:
    """Through the gateway, a worker, Qwen and the real sandbox: Qwen writes up to four programs
    for a word problem (one greedy, three sampled); the first three to reach the sandbox are
    replaced there by the hostile ones. None of them gets out or prints, the sandbox runs the
    rest, the model's own, and the answer is what they printed. How many programs reach the
    sandbox is the model's doing (a sample can fail to parse, or the vote can settle): when no
    program of its own is left after the attacks, every program abstained and the chain of
    thought answers, which the test checks too."""
    from openai import OpenAI

    outside = Path(tempfile.mkdtemp(prefix="ttc-pot-outside-")) / "escaped.txt"
    hostile = [code.format(target=outside) for code in HOSTILE.values()]
    boundary.arm(hostile)
    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    question = "A shop has 5 crates of 12 apples. It sells 23 apples. How many apples are left?"
    params = {"early_stop": False, "timeout_s": 3.0}
    response = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": question}],
        max_tokens=256,
        extra_body={"ttc": {"strategy": "program_of_thought", "n": 4, "params": params}},
    )
    runs = boundary.runs()
    assert runs, "no program reached the sandbox"
    attacks = [r for r in runs if r.executed != r.written]
    assert sorted(r.executed for r in attacks) == sorted(hostile[: min(len(hostile), len(runs))])  # handed out in turn
    for run in attacks:
        outcome = run.response.outcome
        assert outcome.status != sandbox_pb2.EXEC_STATUS_OK, (run.executed, outcome)
        assert b"999" not in outcome.stdout  # neither the network call nor the escaping write got to print
    assert not outside.exists()
    own = [r for r in runs if r.executed == r.written]
    ttc: dict[str, Any] = response.model_extra["ttc"]  # type: ignore[index]
    trace = httpx.get(f"{stack.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()
    seen = sorted(n["execution"]["status"] for n in trace["nodes"] if n.get("execution"))
    assert seen == sorted(STATUS[r.response.outcome.status] for r in runs)  # the worker saw the sandbox's verdicts
    answer = response.choices[0].message.content or ""
    printed = [r.response.outcome.stdout.decode(errors="replace") for r in own
               if r.response.outcome.status == sandbox_pb2.EXEC_STATUS_OK]  # fmt: skip
    values = {vote_key(v) for out in printed if (v := program_answer(out))}
    if values:  # the programs that behaved answer: the answer is one of their vote keys
        assert vote_key(extract_answer(answer) or "") in values, (answer, printed)
    else:  # the model's own programs failed too: every program abstained, chain of thought answers
        assert answer and "999" not in answer, answer
