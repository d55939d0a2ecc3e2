"""Program-of-thought end to end: the real gateway, worker, policy service on
Qwen2.5-Coder-0.5B (the model the effort ladder is calibrated on) and the real sandbox (bwrap).

The model writes a program, the sandbox runs it, the printed output is the answer. Hostile
programs (network, fork bomb, writes outside the private tmp) go through the same sandbox
client the worker uses, and the search still answers from the programs that behaved.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.common.answers import extract_answer
from services.common.grpc_client import insecure_channel
from services.orchestrator.clients import GrpcExecutor
from services.orchestrator.search import run_search
from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import ROOT, RedisServer, start_sandbox
from tests.unit.orchestrator.conftest import make_job
from tests.unit.orchestrator.fakes import ScriptedPolicy, ScriptedVerifier

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


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, sandbox_target: str) -> Iterator[GatewayStack]:
    s = GatewayStack(
        redis_server,
        worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox_target},
        gateway_env={"TTC_GATEWAY_ROUTING_TABLE": str(ROOT / "services/gateway/routing/routing.v2.json")},
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
    """The README's example on the embedded default and the calibrated v2 table: ``none`` is one
    greedy chain-of-thought sample, ``low`` routes the arithmetic question to a program."""
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=300)
    messages = [{"role": "user", "content": "What is 17 + 25?"}]
    low = client.chat.completions.create(model=QWEN, messages=messages, reasoning_effort="low")  # type: ignore[arg-type]
    ttc: dict[str, Any] = low.model_extra["ttc"]  # type: ignore[index]
    assert (ttc["task_type"], ttc["strategy"], ttc["effort_applied"]) == ("arithmetic", "program_of_thought", "low")
    # The greedy program, or (when the model answers in prose instead of code) the greedy
    # chain-of-thought fallback: either way the right number.
    assert extract_answer(low.choices[0].message.content or "") == "42"
    assert ttc["spend"]["probe"]["generated_tokens"] == 0  # the estimator generates nothing
    none = client.chat.completions.create(model=QWEN, messages=messages, reasoning_effort="none", max_tokens=128)  # type: ignore[arg-type]
    assert none.model_extra["ttc"]["strategy"] == "single"  # type: ignore[index]
    assert none.model_extra["ttc"]["candidates_generated"] == 1  # type: ignore[index]


HOSTILE = {
    "network": "import socket\ns = socket.create_connection(('1.1.1.1', 80), timeout=2)\nprint(999)",
    "fork_bomb": "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
    "escape_write": "open('{target}', 'w').write('pwned')\nprint(999)",
}


async def test_hostile_programs_are_contained_and_the_search_still_answers(sandbox_target: str) -> None:
    outside = Path(tempfile.mkdtemp(prefix="ttc-pot-outside-")) / "escaped.txt"
    programs = [*(code.format(target=outside) for code in HOSTILE.values()), "print(6 * 7)"]

    written = itertools.count()

    def respond(call: Any, index: int, seed: int) -> str:
        del call, index, seed
        return f"```python\n{programs[next(written) % len(programs)]}\n```"

    # One greedy program, then three sampled: the four programs, each exactly once.
    job = make_job("program_of_thought", n=4, params={"early_stop": False, "timeout_s": 3.0}, max_tokens=64)
    async with insecure_channel(sandbox_target) as channel:
        result, trace = await run_search(
            job, ScriptedPolicy(respond), ScriptedVerifier(lambda _: 0.0), executor=GrpcExecutor(channel)
        )
    statuses = {n.execution.stdout.strip() or n.execution.status for n in trace.nodes if n.HasField("execution")}
    assert "42" in statuses
    assert "999" not in statuses  # neither the network call nor the escaping write got to print
    assert not outside.exists()
    assert result.answer.rstrip().endswith("The answer is 42."), result.answer
    assert result.budget_used.sandbox_runs == 4
