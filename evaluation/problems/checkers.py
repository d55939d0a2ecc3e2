"""Verified correctness of one model answer against a problem's reference.

Math answers go through the project's one answer extractor and equivalence test
(:mod:`services.common.answers`), so the benchmark agrees with the gateway's votes. Code
answers run the problem's unit tests in the sandbox service; a sandbox that fails (crash,
unreachable, sandbox error) yields ``correct=None`` with an error — an infrastructure outcome,
never a wrong answer (PRIMER §2, §10).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from evaluation.problems.datasets import Problem
from services.common.answers import answers_equivalent, extract_answer, extract_code, normalize_answer

# (program, check_code) -> passed; raises on an infrastructure failure.
CodeRunner = Callable[[str, str], Awaitable[bool]]


@dataclass(frozen=True)
class Verdict:
    """``correct`` is ``None`` when the answer could not be checked (``error`` says why)."""

    correct: bool | None
    answer: str | None  # normalized extracted answer (math) or a hash-free code marker (code)
    error: str = ""


class SandboxError(RuntimeError):
    """The sandbox could not judge the program (as opposed to the program failing its tests)."""


def check_math(problem: Problem, text: str) -> Verdict:
    answer = extract_answer(text)
    if answer is None:
        return Verdict(False, None)
    return Verdict(answers_equivalent(answer, problem.reference), normalize_answer(answer))


def program_for(problem: Problem, text: str) -> str:
    """The program to test: the extracted code, with the prompt prepended when the model only
    wrote the body (HumanEval completions often omit the signature)."""
    code = extract_code(text) or text
    entry = problem.extra.get("entry_point", "")
    if entry and f"def {entry}" not in code:
        return problem.extra.get("prompt", "") + code
    return problem.extra.get("prompt", "").split("def ")[0] + code  # keep the prompt's imports


async def check_code(problem: Problem, text: str, runner: CodeRunner | None) -> Verdict:
    if runner is None:
        return Verdict(None, None, "no sandbox configured for code problems")
    program = program_for(problem, text)
    check = problem.extra["test"] + f"\ncheck({problem.extra['entry_point']})\n"
    try:
        passed = await runner(program, check)
    except Exception as exc:  # the sandbox's failure, not the model's
        return Verdict(None, None, f"sandbox: {type(exc).__name__}: {exc}")
    # Code candidates vote by their source with whitespace squeezed: equal programs agree.
    return Verdict(passed, " ".join(program.split()))


async def check(problem: Problem, text: str, runner: CodeRunner | None = None) -> Verdict:
    """Verdict for ``text`` as an answer to ``problem``."""
    if problem.check == "code":
        return await check_code(problem, text, runner)
    return check_math(problem, text)


def sandbox_runner(target: str, timeout: float = 30.0) -> CodeRunner:
    """A :data:`CodeRunner` that sends HumanEval-style tests to the sandbox service at ``target``."""
    from services.common.grpc_client import insecure_channel
    from services.gen.ttc.v1 import sandbox_pb2, sandbox_pb2_grpc

    async def run(program: str, check_code: str) -> bool:
        async with insecure_channel(target) as channel:
            stub = sandbox_pb2_grpc.SandboxStub(channel)
            reply = await stub.Execute(
                sandbox_pb2.ExecuteRequest(
                    language="python",
                    code=program,
                    tests=[sandbox_pb2.TestCase(name="humaneval", check_code=check_code)],
                ),
                timeout=timeout,
            )
        if reply.outcome.status == sandbox_pb2.EXEC_STATUS_SANDBOX_ERROR:
            raise SandboxError(reply.message or "sandbox error")
        return bool(reply.tests) and all(t.passed for t in reply.tests)

    return run
