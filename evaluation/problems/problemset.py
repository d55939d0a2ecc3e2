"""The calibration problem set: many families, several task kinds, two disjoint splits.

The effort ladder is fitted on the calibration split and checked on the development one (looked
at while the ladder was built, so its figures are not held-out figures: the sealed split,
:mod:`~.sealed`, is the held-out test), so the set must be broad (a ladder fitted on two
families climbs nowhere else) and the splits must never share a problem. Families:

- arithmetic: ``basic_arithmetic``, ``chain_sum``, ``products``;
- word problems: ``gsm_symbolic``, ``leg_counting``;
- code: ``humaneval`` (the prompt only; the hidden tests only score);
- harder mathematics: ``champ``;
- families no task-type rule of ``services/common/task_type.py`` recognizes as arithmetic or
  a word problem (reasoning-gym): counting (``letter_counting``, ``count_bits``), conversion
  (``base_conversion``), sorting (``number_sorting``), strings (``spell_backward``), dates
  (``calendar_arithmetic``), logic (``knights_knaves``).

Splits are disjoint by construction: a problem's split is a salted hash of its content id
(:func:`evaluation.problems.datasets.split_of`), the same rule every other tool uses, so one
question can only ever fall on one side; :func:`check_disjoint` re-checks ids and texts.
The order interleaves families round-robin, so any prefix of the set (a run stopped early)
covers every family.

Answers of the new families are checked by the project's equivalence test and, failing that,
by the generator's own ``score_answer`` on the stored entry (a list or a name has spellings a
numeric test does not know).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from evaluation.problems.datasets import (
    DEVELOPMENT_KEY,
    LEVELS,
    Problem,
    Split,
    assert_disjoint,
    content_id,
    load_problems,
    split_name,
    split_of,
)
from services.common.answers import answers_equivalent, normalize_answer, yes_or_no
from services.common.task_type import asks_yes_or_no

DEFAULT_PER_FAMILY = 16
DEFAULT_SEED = 0


@dataclass(frozen=True)
class Family:
    """One family: its task kind, and for new reasoning-gym families the generator
    configuration per difficulty level (``None``: served by :mod:`~.datasets`)."""

    name: str
    kind: str
    levels: dict[int, dict[str, Any]] | None = None


FAMILIES: tuple[Family, ...] = (
    Family("basic_arithmetic", "arithmetic"),
    Family("chain_sum", "arithmetic"),
    Family("products", "arithmetic"),
    Family("gsm_symbolic", "word"),
    Family("leg_counting", "word"),
    Family("humaneval", "code"),
    Family("champ", "math"),
    Family(
        "letter_counting",
        "counting",
        {
            1: {"min_words": 3, "max_words": 6},
            2: {"min_words": 7, "max_words": 12},
            3: {"min_words": 13, "max_words": 20},
        },
    ),
    Family(
        "count_bits",
        "counting",
        {1: {"min_n": 1, "max_n": 255}, 2: {"min_n": 256, "max_n": 2**16}, 3: {"min_n": 2**16, "max_n": 2**31 - 1}},
    ),
    Family(
        "base_conversion",
        "conversion",
        {
            1: {"min_base": 2, "max_base": 10, "min_value": 0, "max_value": 100},
            2: {"min_base": 2, "max_base": 16, "min_value": 100, "max_value": 1000},
            3: {"min_base": 2, "max_base": 36, "min_value": 1000, "max_value": 100_000},
        },
    ),
    Family(
        "number_sorting",
        "sorting",
        {
            1: {"min_numbers": 3, "max_numbers": 5, "min_decimals": 0, "max_decimals": 0},
            2: {"min_numbers": 6, "max_numbers": 9, "min_decimals": 0, "max_decimals": 1},
            3: {"min_numbers": 10, "max_numbers": 14, "min_decimals": 1, "max_decimals": 2},
        },
    ),
    Family(
        "spell_backward",
        "string",
        {
            1: {"min_word_len": 3, "max_word_len": 5},
            2: {"min_word_len": 6, "max_word_len": 8},
            3: {"min_word_len": 9, "max_word_len": 10},
        },
    ),
    Family(
        "calendar_arithmetic",
        "dates",
        {1: {"offset_upper_bound": 30}, 2: {"offset_upper_bound": 100}, 3: {"offset_upper_bound": 365}},
    ),
    Family(
        "knights_knaves",
        "logic",
        {
            1: {"n_people": 2, "depth_constraint": 2, "width_constraint": 2},
            2: {"n_people": 3, "depth_constraint": 2, "width_constraint": 2},
            3: {"n_people": 4, "depth_constraint": 2, "width_constraint": 2},
        },
    ),
)
FAMILY_BY_NAME = {f.name: f for f in FAMILIES}
TASK_KINDS: tuple[str, ...] = tuple(dict.fromkeys(f.kind for f in FAMILIES))


class UnknownFamily(ValueError):
    """A family name the set does not have; the message lists the known ones."""


def family_names(subset: str = "") -> list[str]:
    """The families named in a comma-separated ``subset``, in its order; every family when empty."""
    return [f for f in subset.split(",") if f] or [f.name for f in FAMILIES]


def family_of(problem: Problem) -> Family:
    try:
        return FAMILY_BY_NAME[problem.dataset]
    except KeyError:
        raise UnknownFamily(f"unknown family {problem.dataset!r}; known: {', '.join(FAMILY_BY_NAME)}") from None


def _rg_family(
    family: Family, level: int, split: Split, seed: int, wanted: int, max_scan: int = 5_000
) -> list[Problem]:
    """``wanted`` problems of ``split`` from a reasoning-gym generator at one level."""
    import reasoning_gym

    assert family.levels is not None
    found: list[Problem] = []
    seen: set[str] = set()
    batch, offset = 64, 0
    while len(found) < wanted and offset * batch < max_scan:
        config = family.levels[level]
        data = reasoning_gym.create_dataset(family.name, seed=seed * 1_000 + level * 100 + offset, size=batch, **config)
        for entry in data:
            question = str(entry["question"])
            pid = content_id(family.name, level, question)
            if pid in seen or (split != "all" and split_of(pid) != split):
                continue
            seen.add(pid)
            scored = {"answer": entry["answer"], "metadata": entry.get("metadata", {})}
            extra = {"rg_entry": json.dumps(scored, sort_keys=True, default=str)}
            found.append(Problem(pid, family.name, level, question, str(entry["answer"]), extra=extra))
            if len(found) >= wanted:
                break
        offset += 1
    if len(found) < wanted:
        raise RuntimeError(f"{family.name} level {level}: found only {len(found)} {split_name(split)} problems")
    return found


def _family_problems(family: Family, split: Split, per_family: int, seed: int) -> list[Problem]:
    """``per_family`` problems of one family, levels interleaved 1, 2, 3, 1, ..."""
    per_level = -(-per_family // len(LEVELS))
    by_level: list[list[Problem]] = []
    for level in LEVELS:
        if family.levels is None:
            by_level.append(load_problems(family.name, per_level, levels=[level], split=split, seed=seed))
        else:
            by_level.append(_rg_family(family, level, split, seed, per_level))
    return _interleave(by_level)[:per_family]


def _interleave(groups: Sequence[Sequence[Problem]]) -> list[Problem]:
    mixed: list[Problem] = []
    for i in range(max((len(g) for g in groups), default=0)):
        mixed.extend(g[i] for g in groups if i < len(g))
    return mixed


def build_problem_set(
    split: Split,
    *,
    per_family: int = DEFAULT_PER_FAMILY,
    seed: int = DEFAULT_SEED,
    families: Sequence[str] | None = None,
) -> list[Problem]:
    """The problem set of one split, families interleaved round-robin, deterministic per seed."""
    if per_family < 1:
        raise ValueError(f"per_family must be >= 1, got {per_family}")
    chosen = []
    for name in families or [f.name for f in FAMILIES]:
        if name not in FAMILY_BY_NAME:
            raise UnknownFamily(f"unknown family {name!r}; known: {', '.join(FAMILY_BY_NAME)}")
        chosen.append(FAMILY_BY_NAME[name])
    return _interleave([_family_problems(f, split, per_family, seed) for f in chosen])


def check_disjoint(calibration: Sequence[Problem], development: Sequence[Problem]) -> None:
    """Raise if the splits share an id or a question, or if a problem sits on the wrong side."""
    assert_disjoint(calibration, development)
    wrong = [p.id for p in calibration if split_of(p.id) != "calibration"]
    wrong += [p.id for p in development if split_of(p.id) != DEVELOPMENT_KEY]
    if wrong:
        raise AssertionError(f"problems on the wrong side of the split: {wrong[:5]}")


@cache
def _rg_scorer(name: str) -> Any:
    import reasoning_gym

    family = FAMILY_BY_NAME[name]
    assert family.levels is not None
    return reasoning_gym.create_dataset(name, seed=0, size=1, **family.levels[1])


# reasoning-gym's knights_knaves checker reads an answer as a bag of (name, role) pairs, so a
# restated condition scores as an assignment: "Liam is a hero if and only if Ethan is a hero"
# and "Scarlett is a hero or Benjamin is a hero" (both from the 0.5B's pools) matched the
# reference "Liam is a hero, and Ethan is a hero". An answer that assigns roles states them
# plainly; one with a logical connective states a condition, not who is what.
_ASSIGNMENT_FAMILIES = frozenset({"knights_knaves"})
_CONNECTIVE = re.compile(r"\b(?:if|iff|or|nor|either|neither|then|unless|not)\b", re.IGNORECASE)


def states_a_condition(problem: Problem, answer: str) -> bool:
    """Whether ``answer`` to a role-assignment puzzle is a condition rather than an assignment."""
    return problem.dataset in _ASSIGNMENT_FAMILIES and _CONNECTIVE.search(answer) is not None


def answer_correct(problem: Problem, answer: str | None) -> bool:
    """Whether an extracted answer (a chain of thought's, or what a program printed) is right:
    the project's equivalence test, then the generator's own checker for the new families
    (for role assignments, only an answer that states them: :func:`states_a_condition`)."""
    if answer is None or not answer.strip():
        return False
    if states_a_condition(problem, answer):
        return False
    if asks_yes_or_no(problem.question):
        answer = yes_or_no(answer)  # as the reply renders a program's True/False
    # CHAMP states some answers in several forms: "C(10, 5), or equivalently 252".
    if any(answers_equivalent(answer, form.strip()) for form in problem.reference.split(", or equivalently ")):
        return True
    entry_text = problem.extra.get("rg_entry")
    if not entry_text:
        return False
    entry = json.loads(entry_text)
    scorer = _rg_scorer(problem.dataset)
    for attempt in dict.fromkeys((answer.strip(), normalize_answer(answer))):
        try:
            if float(scorer.score_answer(attempt, entry)) >= 0.99:
                return True
        except Exception:  # a checker that chokes on odd text is a wrong answer, not a crash
            continue
    return False
