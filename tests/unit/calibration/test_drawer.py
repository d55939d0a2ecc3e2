"""The pool drawer over scripted components: greedy then k sampled, programs keyed and judged as
program-of-thought does, code judged by hidden tests, every call's cost kept."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from calibration.lib.drawer import DrawSettings, PoolDrawer, messages_fingerprint, program_version
from evaluation.problems.datasets import Problem
from services.gen.ttc.v1 import sandbox_pb2
from services.search.interfaces import Candidate, GenerateCall, Generation, Message, ProgramRun
from services.search.strategies import code_execution
from services.search.strategies import program as pot
from tests.helpers.local_executor import LocalExecutor


class ScriptedPolicy:
    """Answers by prompt: program prompts get ``programs``, others ``thoughts`` (in turn)."""

    def __init__(self, thoughts: Sequence[str], programs: Sequence[str]) -> None:
        self.thoughts, self.programs = list(thoughts), list(programs)
        self.calls: list[dict[str, Any]] = []

    async def generate(self, call: GenerateCall, **kw: Any) -> Generation:
        self.calls.append({**vars(call), **kw})
        source = self.programs if pot.PROGRAM_INSTRUCTION in call.messages[-1].content else self.thoughts
        texts = [source.pop(0) for _ in call.seeds]
        cands = tuple(
            Candidate(t, "length" if t == "CUT" else "stop", 7, s) for t, s in zip(texts, call.seeds, strict=True)
        )
        return Generation(cands, prompt_tokens=50, cached_tokens=10)


class Python:
    """Runs the (trusted, test-written) programs with exec and captures what they print."""

    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        import contextlib
        import io

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, {})
        return ProgramRun("ok", out.getvalue(), wall_seconds=0.01)


class Tests:
    """The sandbox stub for hidden tests: passes a program that defines ``add`` correctly."""

    async def Execute(self, request: sandbox_pb2.ExecuteRequest, timeout: float) -> sandbox_pb2.ExecuteResponse:
        scope: dict[str, Any] = {}
        passed = True
        try:
            exec(request.code + "\n" + request.tests[0].check_code, scope)
        except AssertionError:
            passed = False
        outcome = sandbox_pb2.RunOutcome(status=sandbox_pb2.EXEC_STATUS_OK, wall_seconds=0.02)
        return sandbox_pb2.ExecuteResponse(
            outcome=outcome, tests=[sandbox_pb2.TestVerdict(name="hidden", passed=passed, outcome=outcome)]
        )


MATH = Problem("chain_sum/L1/x", "chain_sum", 1, "What is 2 + 3?", "5")


def math_policy() -> ScriptedPolicy:
    return ScriptedPolicy(
        ["The answer is \\boxed{5}.", "so \\boxed{5}", "\\boxed{6}", "CUT"],
        ["```python\nprint(2 + 3)\n```", "```python\n2 + 3\n```", "not code (", "```python\nprint(4)\n```"],
    )


def test_a_math_pool_holds_greedy_then_sampled_chains_and_programs() -> None:
    policy = math_policy()
    drawer = PoolDrawer(policy, Python(), Tests(), DrawSettings(k=3))  # type: ignore[arg-type]
    pool = asyncio.run(drawer.draw(MATH, "calibration"))
    cot, programs = pool.draws["cot"], pool.draws["program"]
    assert [c.greedy for c in cot.candidates] == [True, False, False, False]
    assert [(c.key, c.correct, c.cut) for c in cot.candidates] == [
        ("5", True, False), ("5", True, False), ("6", False, False), ("", False, True),
    ]  # fmt: skip
    # A bare last expression is printed, as program_source does; unparsable text abstains unrun;
    # print(4) ran but computed nothing, so it abstains as served (its verdict is still kept).
    assert [(c.key, c.correct, c.status) for c in programs.candidates] == [
        ("5", True, "ok"), ("5", True, "ok"), ("", False, ""), ("", False, "ok"),
    ]  # fmt: skip
    assert programs.candidates[1].program.endswith("print(2 + 3)")
    assert [(c.n, c.temperature, c.prompt_tokens, c.cached_tokens) for c in cot.calls] == [
        (1, 0.0, 50, 10), (3, 0.7, 50, 10),
    ]  # fmt: skip
    program_call = next(c for c in policy.calls if pot.PROGRAM_INSTRUCTION in c["messages"][-1].content)
    asked = tuple(Message(m["role"], m["content"]) for m in MATH.messages())
    assert program_call["messages"] == pot.program_messages(asked)
    assert programs.prompt == messages_fingerprint(pot.program_messages(asked)) != cot.prompt
    assert program_call["max_tokens"] == pot.PROGRAM_MAX_TOKENS
    again = asyncio.run(PoolDrawer(math_policy(), Python(), Tests(), DrawSettings(k=3)).draw(MATH, "x"))  # type: ignore[arg-type]
    seeds = [c.seed for c in cot.candidates]
    assert len(set(seeds)) == 4 and seeds == [c.seed for c in again.draws["cot"].candidates]


def test_code_candidates_are_judged_by_the_hidden_tests_and_run_on_the_models_own_inputs() -> None:
    test = "def check(candidate):\n    assert candidate(2, 3) == 5\n"
    problem = Problem("humaneval/L1/HumanEval/0", "humaneval", 1, "def add(a, b):\n", "", check="code",
                      extra={"prompt": "def add(a, b):\n", "test": test, "entry_point": "add"})  # fmt: skip
    written = "```python\nassert add(2, 3) == 5\nassert add(0, 0) == 0\n```"
    policy = ScriptedPolicy(
        ["```python\ndef add(a, b):\n    return a + b\n```", "```python\ndef add(a, b):\n    return a - b\n```",
         written], []
    )  # fmt: skip
    pool = asyncio.run(PoolDrawer(policy, LocalExecutor(), Tests(), DrawSettings(k=1)).draw(problem, "heldout"))  # type: ignore[arg-type]
    code = pool.draws["code"]
    assert [c.correct for c in code.candidates] == [True, False]
    assert "return a - b" in code.candidates[1].program and code.candidates[0].sandbox_s == 0.02
    assert pool.kind == "code" and set(pool.draws) == {"code"}
    # the inputs code_execution would write and run, and what each candidate did on them
    assert code.tests is not None and code.tests.entry == "add" and code.tests.cases == (("2, 3", "5"), ("0, 0", "0"))
    assert policy.calls[-1]["messages"] == code_execution.tests_messages("def add(a, b):\n", "add", 8)
    assert code.tests.call.max_tokens == 400 and code.tests.call.temperature == 0.0
    assert [(c.behaviour, c.asserted) for c in code.candidates] == [(["5", "0"], [True, True]),
                                                                   (["-1", "0"], [False, True])]  # fmt: skip


def test_the_program_version_is_a_stable_fingerprint() -> None:
    assert program_version() == program_version() and len(program_version()) == 12
