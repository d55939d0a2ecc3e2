"""A code grader for records whose replies are not code: it fails the test if asked to run any."""

from __future__ import annotations

from calibration.lib.grading import CodeGrader


async def _no_sandbox(program: str, check: str) -> bool:
    raise AssertionError("no code reply here")


def no_code_grader() -> CodeGrader:
    return CodeGrader(given=_no_sandbox)
