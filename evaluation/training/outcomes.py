"""A candidate's outcome label, from independent checks only.

What decides: the problem's checker (:func:`~evaluation.problems.problemset.answer_correct`, as
the pools recorded it), the sandbox's run of a program, the hidden tests of a code problem, and
the program-of-thought rule that tells a computed answer from a guessed one
(:func:`~services.search.strategies.program_checks.computes_nothing`). Never a judge's score
(``orm``, ``prm``: the policy grading itself): a model trained on its own judge's taste learns
the judge's mistakes. A candidate whose check failed for an infrastructure reason (``correct``
is ``None``) cannot be labelled and is left out.

The label is true for a complete answer found right: a right answer cut at ``max_tokens`` is an
answer the model would not have finished, and a program that prints a literal got its value
from the model's head, not from running. Why a false label is false, first match wins:
``cut`` (generation hit ``max_tokens``), ``timeout`` (the sandbox stopped the program),
``program_error`` (it crashed, hit a memory or output limit, or a code answer does not parse),
``wrong_form`` (no program in the reply, nothing printed, no answer stated, a condition where
roles were asked), ``literal_guess`` (the program computes nothing), ``wrong_value``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from evaluation.pools.store import PoolCandidate
from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import states_a_condition
from evaluation.training.formats import FailureKind
from services.common.answer_form import strip_form
from services.search.strategies.program_checks import computes_nothing


@dataclass(frozen=True)
class Outcome:
    """``label``: verified right and complete; ``correct``: the checker's verdict alone."""

    label: bool
    correct: bool
    failure: FailureKind | None = None
    detail: str = ""


def _failed(correct: bool, failure: FailureKind, detail: str = "") -> Outcome:
    return Outcome(False, correct, failure, detail)


def _parses(program: str) -> bool:
    try:
        ast.parse(program)
    except SyntaxError:
        return False
    return True


def program_outcome(problem: Problem, correct: bool, *, program: str, status: str, answer: str) -> Outcome:
    """A program-of-thought answer: ``program`` as run ("" when the reply held none), the
    sandbox ``status``, and ``answer`` read from what it printed."""
    if not program:
        return _failed(correct, "wrong_form", "no program in the reply")
    if status == "timeout":
        return _failed(correct, "timeout", status)
    if status != "ok":
        return _failed(correct, "program_error", status)
    if not answer:
        return _failed(correct, "wrong_form", "printed no answer")
    guess = computes_nothing(program, answer, problem.question, strip_form(problem.question))
    if guess is not None:
        return _failed(correct, "literal_guess", guess)
    return Outcome(True, True) if correct else _failed(False, "wrong_value")


def text_outcome(problem: Problem, correct: bool, answer: str) -> Outcome:
    """A chain of thought (or any text answer) whose extracted ``answer`` the checker judged."""
    if not answer:
        return _failed(correct, "wrong_form", "no answer stated")
    if correct:
        return Outcome(True, True)
    if states_a_condition(problem, answer):
        return _failed(False, "wrong_form", "states a condition, not an assignment")
    return _failed(False, "wrong_value")


def pool_outcome(problem: Problem, kind: str, candidate: PoolCandidate) -> Outcome | None:
    """The label of one pool candidate of draw ``kind``; ``None`` when it was never verified."""
    if candidate.correct is None:
        return None
    correct = candidate.correct
    if candidate.cut:
        return _failed(correct, "cut", "hit max_tokens")
    if kind == "program":
        return program_outcome(problem, correct, program=candidate.program, status=candidate.status,
                               answer=candidate.answer)  # fmt: skip
    if kind == "code":
        if correct:
            return Outcome(True, True)
        if not _parses(candidate.program):
            return _failed(False, "program_error", "does not parse")
        return _failed(False, "wrong_value", "fails the hidden tests")
    return text_outcome(problem, correct, candidate.answer)
