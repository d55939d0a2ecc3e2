"""The problems the before/after evaluation runs on, each with the checker that judges it.

- **development**: the base model's development pool problems, read from
  its pool folder, so both models answer exactly the problems the base's vote was priced on;
  judged by :func:`~evaluation.problems.problemset.answer_correct`.
- **sealed**: the sealed test split (:mod:`evaluation.problems.sealed`), families no calibration,
  development run or tuning has seen; judged as the sealed run judges a reply
  (:mod:`evaluation.heldout.sealed_grade`): reasoning-gym's own checker of the family on the
  stored entry, right only at a grade of 1.0, here on the answer the chain of thought states or
  the program prints.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from evaluation.heldout.sealed_grade import RIGHT, scorer
from evaluation.pools.store import read_pools
from evaluation.problems.datasets import DEVELOPMENT_KEY, Problem
from evaluation.problems.problemset import answer_correct
from evaluation.problems.sealed import SEALED_PATH, load_sealed

EvalSplit = Literal["development", "sealed"]
EVAL_SPLITS: tuple[EvalSplit, ...] = ("development", "sealed")
Checker = Callable[[Problem, str | None], bool]
#: the task kind recorded for a sealed problem (its families have no kind in the problem set)
SEALED_KIND = "sealed"


@dataclass(frozen=True)
class EvalProblem:
    """A problem, its family and task kind as pools record them, and its checker."""

    problem: Problem
    family: str
    kind: str
    check: Checker


def sealed_correct(problem: Problem, answer: str | None) -> bool:
    """Whether ``answer`` to a sealed problem is right (module docstring); a checker that chokes
    on it makes it wrong, never a crash."""
    if answer is None or not answer.strip():
        return False
    try:
        grade = float(scorer(problem.dataset).score_answer(answer.strip(), json.loads(problem.extra["rg_entry"])))
    except Exception:  # reasoning-gym checkers raise on malformed answers
        return False
    return grade >= RIGHT


def development_problems(base_pools: Path) -> list[EvalProblem]:
    """The development problems of a base model's pool folder, in the order first drawn."""
    return [EvalProblem(Problem.from_dict(p.problem), p.family, p.kind, answer_correct)
            for p in read_pools(base_pools, DEVELOPMENT_KEY)]  # fmt: skip


def sealed_problems(path: Path = SEALED_PATH) -> list[EvalProblem]:
    """The sealed split's problems, in their committed order."""
    problems = [(Problem(p.id, p.family, 0, p.question, p.reference, extra={"rg_entry": p.rg_entry}), p.family)
                for p in load_sealed(path)]  # fmt: skip
    return [EvalProblem(problem, family, SEALED_KIND, sealed_correct) for problem, family in problems]
