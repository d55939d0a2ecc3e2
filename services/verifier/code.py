"""The code_tests verifier: run each candidate's code against the request's tests in the sandbox.

Score is the fraction of tests passed, ``passed`` means all passed, feedback carries the
failing tests' output (what sequential revision feeds back to the model). A sandbox that
could not run a candidate is an infrastructure failure: that candidate gets ``error`` set,
never a silent "wrong code" (PRIMER §2, §10); a sandbox that is down fails the call.
"""

from __future__ import annotations

import functools
import re

from services.common.answers import extract_code
from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import sandbox_pb2
from services.verifier.base import VerifierInfo, VerifierKind
from services.verifier.tasks import run_bounded
from services.verifier.types import CodeSpec, ExecResult, Outcome, SandboxError, SandboxRunner, Verdict, VerifyJob

FEEDBACK_CHARS = 2000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINES_CHECK = re.compile(r"^def\s+check\s*\(", re.MULTILINE)


def candidate_code(candidate: str) -> str:
    """The last fenced Python block, or the whole text when the candidate is bare code."""
    code = extract_code(candidate)
    return code if code is not None else candidate.strip()


def prepare_tests(spec: CodeSpec) -> list[sandbox_pb2.TestCase]:
    """HumanEval tests define ``check(candidate)`` but do not call it: add the call on the entry point."""
    tests = []
    for test in spec.tests:
        prepared = sandbox_pb2.TestCase()
        prepared.CopyFrom(test)
        call = f"check({spec.entry_point})"
        if spec.entry_point and _DEFINES_CHECK.search(test.check_code) and call not in test.check_code:
            prepared.check_code = f"{test.check_code.rstrip()}\n\n{call}\n"
        tests.append(prepared)
    return tests


def verdict_from_run(code: str, result: ExecResult) -> Verdict:
    """Fold per-test results into a verdict; any test the sandbox failed to run makes it an error."""
    infra = [t for t in result.tests if t.infra_error]
    if infra:
        detail = result.message or "; ".join(f"{t.name}: {t.output[:200]}".rstrip(": ") for t in infra)
        return Verdict(extracted_answer=code, error=f"sandbox error: {detail}")
    if not result.tests:
        return Verdict(extracted_answer=code, error=f"sandbox returned no test results: {result.message}")
    passed = sum(t.passed for t in result.tests)
    failing = [t for t in result.tests if not t.passed]
    feedback = "\n".join(f"test {t.name or '?'} failed ({t.status}): {t.output}".rstrip() for t in failing)
    return Verdict(
        score=passed / len(result.tests),
        passed=not failing,
        extracted_answer=code,
        feedback=feedback[:FEEDBACK_CHARS] if failing else f"all {passed} tests passed",
    )


class CodeTests(VerifierKind):
    info = VerifierInfo(name="code_tests", needs_code=True)

    def __init__(self, sandbox: SandboxRunner, concurrency: int) -> None:
        self.sandbox = sandbox
        self.concurrency = concurrency

    def validate(self, job: VerifyJob) -> None:
        if not job.code.tests:
            raise InvalidArgument("code_tests needs at least one test in code.tests", field="code.tests")
        if job.code.entry_point and not _IDENTIFIER.fullmatch(job.code.entry_point):
            raise InvalidArgument("code.entry_point must be a Python identifier", field="code.entry_point")
        for i, test in enumerate(job.code.tests):
            if not test.check_code.strip() and not test.HasField("expected_stdout"):
                raise InvalidArgument(
                    "a test needs check_code or expected_stdout, else it checks nothing", field=f"code.tests[{i}]"
                )

    async def verify(self, job: VerifyJob) -> Outcome:
        tests = prepare_tests(job.code)

        async def judge(candidate: str) -> Verdict:
            code = candidate_code(candidate)
            if not code:
                return Verdict(feedback="no code found in the candidate")
            try:
                result = await self.sandbox.run_tests(code, tests, job.code.limits)
            except SandboxError as err:
                return Verdict(extracted_answer=code, error=f"sandbox error: {err}")
            return verdict_from_run(code, result)

        verdicts = await run_bounded([functools.partial(judge, c) for c in job.candidates], self.concurrency)
        return Outcome(verdicts)
