"""The before/after comparison: Newcombe's paired interval (his published example), one that does
not collapse when nothing differs, the greedy program credited only when it computed its answer,
and the base's vote mixed to exactly the tuned model's tokens."""

from __future__ import annotations

import dataclasses

import pytest

from evaluation.pools.store import ProblemPool
from evaluation.training.before_after import budget_matched, compare, greedy_outcomes, vote_curve
from evaluation.training.paired import paired
from tests.unit.evaluation.training.fixtures import cot, problem_pool, program


def table(both: int, a_only: int, b_only: int, neither: int) -> tuple[dict[str, float], dict[str, float]]:
    cells = [(1.0, 1.0)] * both + [(1.0, 0.0)] * a_only + [(0.0, 1.0)] * b_only + [(0.0, 0.0)] * neither
    return {str(i): x for i, (x, _) in enumerate(cells)}, {str(i): y for i, (_, y) in enumerate(cells)}


def test_newcombes_worked_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17:2635, table II, (a, b, c, d) = (36, 12, 2, 0): method 10
    result = paired(*table(36, 12, 2, 0))
    assert result.n == 50 and result.difference == pytest.approx(0.2)
    assert result.interval == pytest.approx((0.0569, 0.3404), abs=5e-5)
    assert (result.both, result.a_only, result.b_only, result.neither) == (36, 12, 2, 0)


def test_no_difference_still_has_an_interval() -> None:
    result = paired(*table(10, 0, 0, 10))
    assert result.difference == 0.0 and result.interval[0] < -0.05 and result.interval[1] > 0.05


def test_fractional_values_and_unshared_problems() -> None:
    result = paired({"p": 1.0, "q": 0.0, "only-a": 1.0}, {"p": 0.25, "q": 0.75, "only-b": 0.0})
    assert result.n == 2 and result.b == pytest.approx(0.5) and result.a_only == pytest.approx(0.75)
    assert result.interval[0] <= result.difference <= result.interval[1]
    with pytest.raises(ValueError):
        paired({"p": 1.0}, {"q": 1.0})


def pool(pid: str, greedy_program: tuple[str, str, bool], programs: list[tuple[str, str, bool]],
         thoughts: list[tuple[str, bool, int]]) -> ProblemPool:  # fmt: skip
    progs = [
        program(i, src, out, ok, tokens=10 * (i + 1)) for i, (src, out, ok) in enumerate([greedy_program, *programs])
    ]
    thinks = [cot(i, ans, ok, tokens=tok) for i, (ans, ok, tok) in enumerate(thoughts)]
    return problem_pool(f"What is {pid}?", "5", pid=pid, program=progs, cot=thinks)


def test_a_greedy_program_that_prints_a_literal_is_not_credited() -> None:
    computed = pool("a", ("print(2 + 3)", "5\n", True), [], [("5", True, 30)])
    literal = pool("b", ("print(5)", "5\n", True), [], [("5", True, 30)])
    draw = literal.draws["program"]  # the checker found 5 right; program_vote gave it no key
    abstained = dataclasses.replace(draw, candidates=(dataclasses.replace(draw.candidates[0], key=""),))
    literal = dataclasses.replace(literal, draws={**literal.draws, "program": abstained})
    right, tokens = greedy_outcomes([computed, literal], "program")
    assert right == {"a": 1.0, "b": 0.0} and tokens == {"a": 10, "b": 10}


def test_the_base_vote_is_mixed_to_the_tuned_models_tokens() -> None:
    base = [pool(pid, ("print(2 + 3)", "5\n", True), [], [("9", False, 40), ("5", True, 20), ("5", True, 20),
                                                         ("4", False, 20)]) for pid in ("a", "b")]  # fmt: skip
    curve = vote_curve(base, "cot", ["a", "b"])
    assert [p.n for p in curve] == [1, 2, 3]
    assert [p.mean_generated(["a", "b"]) for p in curve] == [20.0, 40.0, 60.0]
    matched = budget_matched(curve, 30.0, ["a", "b"])
    assert (matched.low, matched.high, matched.weight, matched.generated) == (1, 2, 0.5, 30.0)
    expected = 0.5 * curve[0].accuracy["a"] + 0.5 * curve[1].accuracy["a"]
    assert matched.accuracy["a"] == pytest.approx(expected)
    cheapest = budget_matched(curve, 5.0, ["a", "b"])  # the tuned answer is shorter than any vote
    assert (cheapest.low, cheapest.weight) == (1, 0.0)


def test_compare_pairs_tuned_and_base_on_the_problems_both_answered() -> None:
    thoughts = [("5", True, 30), ("5", True, 20), ("5", True, 20), ("4", False, 20)]
    tuned = [pool("a", ("print(2 + 3)", "5\n", True), [], thoughts), pool("b", ("print(2 + 2)", "4\n", False), [],
                                                                          thoughts)]  # fmt: skip
    base = [pool(pid, ("print(2 + 2)", "4\n", False), [("print(2 + 3)", "5\n", True)], thoughts) for pid in "ab"]
    result = compare(tuned, base, "program", base)
    assert result is not None and result.greedy.n == 2
    assert (result.greedy.a, result.greedy.b) == (0.5, 0.0) and result.tuned_tokens == 10.0
    assert result.vote is not None and result.matched is not None and result.matched.low == 1
    assert compare(tuned, base, "code", base) is None
    assert result.to_dict()["vote"]["n_low"] == 1
