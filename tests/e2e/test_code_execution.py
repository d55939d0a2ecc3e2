"""Code chosen by running it, end to end: the gateway routes a code request at effort ``low``
to ``code_execution`` with three candidates (routing.v2.json, the default table, which routes
every model here: the stack names no per-model table; higher efforts draw more of the same and
took 91 s here at ``high``), the worker draws candidates and model-written tests
from the policy service (Qwen2.5-Coder-0.5B on llama.cpp), and every candidate runs in the real
sandbox (bwrap); the client is the official openai SDK.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from evaluation.problems.checkers import sandbox_runner
from services.common.answers import extract_code
from tests.e2e.gateway_stack import GatewayStack
from tests.helpers.processes import ROOT, RedisServer, start_sandbox

pytestmark = pytest.mark.e2e
QWEN = "qwen2.5-coder-0.5b"
QUESTION = (
    "Write a Python function `is_palindrome(text: str) -> bool` that returns True when the text reads the same "
    "forwards and backwards, ignoring letter case, and False otherwise."
)
# Used only to check the answer: the strategy never sees them.
HIDDEN = "assert is_palindrome('Level')\nassert not is_palindrome('python')\nassert is_palindrome('')\n"


@pytest.fixture(scope="module")
def sandbox_target() -> Iterator[str]:
    sandbox = start_sandbox(100000 + (os.getpid() % 500) * 64, 4)
    try:
        yield sandbox.target
    finally:
        sandbox.process.stop()


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer, sandbox_target: str) -> Iterator[GatewayStack]:
    s = GatewayStack(
        redis_server,
        worker_env={"TTC_ORCHESTRATOR_SANDBOX_TARGET": sandbox_target},
        gateway_env={
            "TTC_GATEWAY_ROUTING_TABLE": str(ROOT / "services/gateway/routing/routing.v2.json"),
            # The candidates and the test-writing call on 2 busy cores can take longer than the
            # stack's default 120 s job deadline, which would stop the search before any run.
            "TTC_GATEWAY_JOB_TIMEOUT_S": "900",
        },
    )
    try:
        s.start_policy({"TTC_POLICY_MODEL": QWEN})
        s.start_worker()
        s.start_gateway()
        yield s
    finally:
        s.stop()


async def test_a_code_request_runs_its_candidates_in_the_sandbox(stack: GatewayStack, sandbox_target: str) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=f"{stack.url}/v1", api_key="unused", max_retries=0, timeout=900)
    response = client.chat.completions.create(
        model=QWEN,
        messages=[{"role": "user", "content": QUESTION}],
        reasoning_effort="low",
        max_tokens=256,
    )
    ttc: dict[str, Any] = response.model_extra["ttc"]  # type: ignore[index]
    assert (ttc["task_type"], ttc["strategy"], ttc["effort_applied"]) == ("code", "code_execution", "low")
    assert ttc["termination"] == "completed", ttc
    trace = httpx.get(f"{stack.url}/v1/traces/{ttc['trace_id']}", timeout=30).json()
    nodes = trace["nodes"]
    candidates = [n for n in nodes if n["action"] == "generate"]
    runs = [n["execution"] for n in candidates if n.get("execution")]
    inputs = next(n for n in nodes if n["action"] == "inputs")
    assert len(candidates) == 3  # the routed n at low effort
    assert inputs.get("visits", 0) >= 1, inputs  # the model's tests gave inputs
    assert runs and all(r["status"] in ("ok", "runtime_error", "timeout") for r in runs)
    assert "@@ttc-case@@" in runs[0]["stdout"]  # the harness ran the candidate on the inputs
    assert ttc["spend"]["sandbox"]["runs"] == len(runs)
    assert [n for n in nodes if n["action"] == "cluster"]
    # The answer is one of the candidates, a function that passes tests the search never saw.
    answer = response.choices[0].message.content or ""
    assert answer in {n["text"] for n in candidates}
    code = extract_code(answer) or answer
    assert "is_palindrome" in {f.name for f in ast.walk(ast.parse(code)) if isinstance(f, ast.FunctionDef)}
    assert await sandbox_runner(sandbox_target)(code, HIDDEN), code
