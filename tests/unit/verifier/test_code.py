"""The code_tests verifier with a scripted sandbox."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument, Unavailable
from services.gen.ttc.v1 import sandbox_pb2
from services.verifier.code import CodeTests, candidate_code, prepare_tests
from services.verifier.types import CodeSpec, SandboxError, VerifyJob
from tests.unit.verifier.scripted import ScriptedSandbox

CHECK = "def check(candidate):\n    assert candidate(1, 2) == 3\n"


def spec(*names: str, entry_point: str = "add") -> CodeSpec:
    return CodeSpec(tests=tuple(sandbox_pb2.TestCase(name=n, check_code=CHECK) for n in names), entry_point=entry_point)


def job(*candidates: str, code: CodeSpec) -> VerifyJob:
    return VerifyJob(verifier="code_tests", candidates=candidates, code=code)


def correct_if_adds(code: str, test: sandbox_pb2.TestCase) -> tuple[bool, str, str]:
    if "a + b" in code:
        return True, "EXEC_STATUS_OK", ""
    return False, "EXEC_STATUS_RUNTIME_ERROR", "AssertionError"


def test_fenced_code_is_extracted_else_the_whole_text() -> None:
    assert candidate_code("Here:\n```python\ndef add(a, b):\n    return a + b\n```\nDone") == (
        "def add(a, b):\n    return a + b"
    )
    assert candidate_code("def add(a, b): return a + b\n") == "def add(a, b): return a + b"


def test_humaneval_check_gets_called_on_the_entry_point() -> None:
    (prepared,) = prepare_tests(spec("t"))
    assert prepared.check_code.rstrip().endswith("check(add)")
    (untouched,) = prepare_tests(spec("t", entry_point=""))
    assert untouched.check_code == CHECK


async def test_score_is_the_fraction_passed_and_feedback_names_failures() -> None:
    def half(code: str, test: sandbox_pb2.TestCase) -> tuple[bool, str, str]:
        return (test.name == "a", "EXEC_STATUS_OK" if test.name == "a" else "EXEC_STATUS_RUNTIME_ERROR", "boom")

    sandbox = ScriptedSandbox(half)
    out = await CodeTests(sandbox, 4).verify(job("```python\nx\n```", code=spec("a", "b")))
    (v,) = out.verdicts
    assert v.score == pytest.approx(0.5) and not v.passed
    assert "test b failed (EXEC_STATUS_RUNTIME_ERROR): boom" in v.feedback and not v.error


async def test_correct_and_wrong_solutions_in_one_call() -> None:
    sandbox = ScriptedSandbox(correct_if_adds)
    good = "```python\ndef add(a, b):\n    return a + b\n```"
    bad = "```python\ndef add(a, b):\n    return a - b\n```"
    out = await CodeTests(sandbox, 4).verify(job(good, bad, code=spec("t1", "t2")))
    assert [v.passed for v in out.verdicts] == [True, False]
    assert [v.score for v in out.verdicts] == [1.0, 0.0]
    assert len(sandbox.calls) == 2


async def test_sandbox_errors_are_errors_not_wrong_code() -> None:
    def broken(code: str, test: sandbox_pb2.TestCase) -> tuple[bool, str, str]:
        return False, "EXEC_STATUS_SANDBOX_ERROR", "bwrap: setting up uid map: Permission denied"

    out = await CodeTests(ScriptedSandbox(broken), 4).verify(job("x = 1", code=spec("t")))
    (v,) = out.verdicts
    assert v.error.startswith("sandbox error: t") and "bwrap" in v.error

    raising = ScriptedSandbox(correct_if_adds, raise_for=lambda code: SandboxError("deadline exceeded"))
    out = await CodeTests(raising, 4).verify(job("x = 1", code=spec("t")))
    assert out.verdicts[0].error == "sandbox error: deadline exceeded"


async def test_a_sandbox_outage_fails_the_call() -> None:
    down = ScriptedSandbox(correct_if_adds, raise_for=lambda code: Unavailable("sandbox service is unavailable"))
    with pytest.raises(Unavailable):
        await CodeTests(down, 2).verify(job("a", "b", "c", code=spec("t")))


async def test_empty_candidate_is_wrong_without_running() -> None:
    sandbox = ScriptedSandbox(correct_if_adds)
    out = await CodeTests(sandbox, 4).verify(job("   ", code=spec("t")))
    assert not out.verdicts[0].passed and "no code" in out.verdicts[0].feedback and sandbox.calls == []


@pytest.mark.parametrize(
    ("code", "field"),
    [
        (CodeSpec(), "code.tests"),
        (CodeSpec(tests=(sandbox_pb2.TestCase(name="t", check_code=CHECK),), entry_point="1bad"), "code.entry_point"),
        (CodeSpec(tests=(sandbox_pb2.TestCase(name="empty"),)), "code.tests[0]"),
    ],
)
def test_invalid_code_specs(code: CodeSpec, field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        CodeTests(ScriptedSandbox(correct_if_adds), 1).validate(job("x", code=code))
    assert err.value.field == field
