"""Outcome labels come from independent checks only: each failure kind from the candidate's own
record, right-but-cut and right-but-guessed answers labelled false, judge scores never read."""

from __future__ import annotations

import dataclasses

import pytest

from evaluation.problems.datasets import Problem
from evaluation.training.outcomes import Outcome, pool_outcome
from tests.unit.evaluation.training.fixtures import cot, program

PROBLEM = Problem("chain_sum/L1/x", "chain_sum", 1, "What is 8 + 5?", "13")


@pytest.mark.parametrize(
    ("kind", "candidate", "expected"),
    [
        ("cot", cot(0, "13", True), Outcome(True, True)),
        ("cot", cot(0, "26", False), Outcome(False, False, "wrong_value")),
        ("cot", cot(0, "", False), Outcome(False, False, "wrong_form", "no answer stated")),
        ("cot", cot(0, "13", True, cut=True), Outcome(False, True, "cut", "hit max_tokens")),
        ("program", program(0, "print(8 + 5)", "13\n", True), Outcome(True, True)),
        ("program", program(0, "print(8 - 5)", "3\n", False), Outcome(False, False, "wrong_value")),
        ("program", program(0, "print(13)", "13\n", True), Outcome(False, True, "literal_guess", "prints a literal")),
        ("program", program(0, "1 / 0", "", False, status="runtime_error"),
         Outcome(False, False, "program_error", "runtime_error")),
        ("program", program(0, "while True: pass", "", False, status="timeout"),
         Outcome(False, False, "timeout", "timeout")),
        ("program", program(0, "x = 8 + 5", "", False), Outcome(False, False, "wrong_form", "printed no answer")),
        ("program", dataclasses.replace(program(0, "", "", False), program="", status=""),
         Outcome(False, False, "wrong_form", "no program in the reply")),
    ],
)  # fmt: skip
def test_failure_kinds(kind: str, candidate: object, expected: Outcome) -> None:
    assert pool_outcome(PROBLEM, kind, candidate) == expected  # type: ignore[arg-type]


def test_code_failures_are_parse_errors_or_failed_tests() -> None:
    base = dataclasses.replace(cot(0, "", False), program="def f(:\n  pass")
    assert pool_outcome(PROBLEM, "code", base) == Outcome(False, False, "program_error", "does not parse")
    ran = dataclasses.replace(base, program="def f():\n    return 1\n")
    assert pool_outcome(PROBLEM, "code", ran) == Outcome(False, False, "wrong_value", "fails the hidden tests")
    assert pool_outcome(PROBLEM, "code", dataclasses.replace(ran, correct=True)) == Outcome(True, True)


def test_an_unchecked_candidate_has_no_label() -> None:
    assert pool_outcome(PROBLEM, "cot", dataclasses.replace(cot(0, "13", True), correct=None)) is None


def test_judge_scores_never_decide() -> None:
    """A wrong answer the policy's own judge loved is still wrong; a right one it hated still right."""
    loved = cot(0, "26", False, scores={"orm": 1.0, "prm": 1.0})
    hated = cot(1, "13", True, scores={"orm": 0.0, "prm": 0.0})
    assert pool_outcome(PROBLEM, "cot", loved) == Outcome(False, False, "wrong_value")
    assert pool_outcome(PROBLEM, "cot", hated) == Outcome(True, True)
