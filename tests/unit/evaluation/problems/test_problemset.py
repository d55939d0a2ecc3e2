"""The calibration problem set: big and broad enough, deterministic, and its splits disjoint."""

from __future__ import annotations

import pytest

from evaluation.problems.datasets import Problem, split_key
from evaluation.problems.problemset import (
    FAMILIES,
    UnknownFamily,
    answer_correct,
    build_problem_set,
    check_disjoint,
    family_of,
)


@pytest.fixture(scope="module")
def splits() -> dict[str, list[Problem]]:
    return {s: build_problem_set(split_key(s)) for s in ("calibration", "development")}


def test_each_split_has_the_size_and_breadth_the_ladder_needs(splits: dict[str, list[Problem]]) -> None:
    for problems in splits.values():
        assert len(problems) >= 200
        assert len({p.dataset for p in problems}) >= 10
        kinds = {family_of(p).kind for p in problems}
        assert {"arithmetic", "word", "code", "math", "counting", "conversion", "logic"} <= kinds
        assert len({p.id for p in problems}) == len(problems)
    # Round-robin: the first len(FAMILIES) problems cover every family (a run stopped early is broad).
    assert {p.dataset for p in splits["calibration"][: len(FAMILIES)]} == {f.name for f in FAMILIES}


def test_splits_are_disjoint_and_deterministic(splits: dict[str, list[Problem]]) -> None:
    check_disjoint(splits["calibration"], splits["development"])
    again = build_problem_set("calibration", families=["letter_counting", "humaneval"], per_family=4)
    assert [p.id for p in again] == [p.id for p in build_problem_set("calibration",
                                     families=["letter_counting", "humaneval"], per_family=4)]  # fmt: skip
    with pytest.raises(AssertionError):
        check_disjoint(splits["calibration"][:3], splits["calibration"][2:5])


def test_swapped_splits_are_caught(splits: dict[str, list[Problem]]) -> None:
    with pytest.raises(AssertionError, match="wrong side"):
        check_disjoint(splits["development"][:3], splits["calibration"][:3])


def test_new_families_are_checked_by_their_generator(splits: dict[str, list[Problem]]) -> None:
    new = [p for p in splits["calibration"] if "rg_entry" in p.extra]
    assert {p.dataset for p in new} >= {"knights_knaves", "number_sorting", "spell_backward", "calendar_arithmetic"}
    for problem in new:
        assert answer_correct(problem, problem.reference), problem.id
        assert not answer_correct(problem, "no answer here"), problem.id
        assert not answer_correct(problem, None)


def test_code_problems_keep_their_hidden_tests_out_of_the_question(splits: dict[str, list[Problem]]) -> None:
    code = [p for p in splits["development"] if p.check == "code"]
    assert code and all(p.extra["test"] not in p.question for p in code)


def test_unknown_family_is_named() -> None:
    with pytest.raises(UnknownFamily, match="known: basic_arithmetic"):
        build_problem_set("calibration", families=["nope"])


def test_every_stated_form_of_a_champ_answer_counts() -> None:
    problem = Problem("champ/L1/x", "champ", 1, "q", "C(10, 5), or equivalently 252")
    assert answer_correct(problem, "252") and answer_correct(problem, "C(10, 5)")
    assert not answer_correct(problem, "251")


def test_a_programs_true_or_false_counts_as_the_yes_or_no_the_reply_renders() -> None:
    asked = Problem("champ/L1/y", "champ", 1, "Does a polyhedron exist with an odd number of odd faces?", "No")
    assert answer_correct(asked, "False") and not answer_correct(asked, "True")
    other = Problem("champ/L1/z", "champ", 1, "What does 1 > 2 evaluate to?", "No")
    assert not answer_correct(other, "False")  # not a yes/no question: the reply shows False


def test_a_restated_condition_is_not_a_role_assignment(splits: dict[str, list[Problem]]) -> None:
    """Answers from the 0.5B's pools that reasoning-gym's bag-of-pairs checker accepted."""
    puzzle = next(p for p in splits["calibration"] if p.dataset == "knights_knaves")
    first, second = (name for name, _ in _pairs(puzzle.reference))
    role = {name: r for name, r in _pairs(puzzle.reference)}
    stated = f"{first} is a {role[first]}, and {second} is a {role[second]}"
    assert answer_correct(puzzle, stated)
    assert not answer_correct(puzzle, f"{second} is a {role[second]} if and only if {first} is a {role[first]}")
    assert not answer_correct(puzzle, f"{first} is a {role[first]} or {second} is a {role[second]}")
    assert not answer_correct(puzzle, f"{first} is a {first} is a {role[first]} if {second} is a {role[second]}")


def _pairs(reference: str) -> list[tuple[str, str]]:
    """("Ethan", "angel") pairs of a knights-and-knaves reference ("Ethan is an angel, and …")."""
    import re

    return re.findall(r"(\w+) is an? (\w+)", reference)
