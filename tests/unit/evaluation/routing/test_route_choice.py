"""The stable route choice: a configuration moves an effort's route only by a paired margin."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from evaluation.routing.route_choice import beats, best, choose_stable, dominates, effort_budgets
from evaluation.routing.types import ConfigStats, ProblemStats

BUDGETS = {"none": 100.0, "minimal": 100.0, "low": 200.0, "medium": 400.0, "high": 800.0}
COST = {"greedy": 100.0, "pot@1": 60.0, "pot@4": 180.0, "sc@4": 400.0, "sc@8": 800.0}


def problems(accuracy: Mapping[str, list[float]]) -> list[ProblemStats]:
    """One ProblemStats per index, each configuration's accuracy on it from ``accuracy``."""
    count = len(next(iter(accuracy.values())))
    out = []
    for i in range(count):
        st = ProblemStats(f"p{i}", "q", 1)
        for config, values in accuracy.items():
            st.configs[config] = ConfigStats(accuracy=values[i], tokens=COST[config], requests=1)
        out.append(st)
    return out


def labels(choices: Mapping[str, object]) -> dict[str, str]:
    return {effort: c.config for effort, c in choices.items()}  # type: ignore[attr-defined]


def test_one_lucky_problem_does_not_move_a_route() -> None:
    stats = problems({"greedy": [0, 0, 0, 0], "pot@1": [1, 0, 0, 0]})
    assert not beats(stats, "pot@1", "greedy")  # mean 0.25, one standard error 0.25: not beyond it
    assert beats(problems({"greedy": [0, 0, 0, 0], "pot@1": [1, 1, 0, 0]}), "pot@1", "greedy")


def test_one_problem_has_no_spread_and_never_moves() -> None:
    assert not beats(problems({"greedy": [0.0], "pot@1": [1.0]}), "pot@1", "greedy")


def test_imputed_figures_are_no_evidence_for_a_margin_or_dominance() -> None:
    # pot@1 measured on p0 only (right), imputed on the rest as greedy + that difference: counted,
    # seven identical differences of +1 would clear any margin; read as evidence, one problem cannot.
    stats = problems({"greedy": [0.0] * 8, "pot@1": [1.0] * 8})
    guessed = {"pot@1": {f"p{i}" for i in range(1, 8)}}
    assert beats(stats, "pot@1", "greedy") and dominates(stats, "pot@1", "greedy")
    assert not beats(stats, "pot@1", "greedy", guessed=guessed)
    assert not dominates(stats, "pot@1", "greedy", guessed)
    assert labels(choose_stable(stats, list(COST)[:2], {"minimal": 100.0}, start="greedy", guessed=guessed)) == {
        "minimal": "greedy"
    }
    measured = {"pot@1": {f"p{i}" for i in range(4, 8)}}  # measured on four: the margin holds there
    assert beats(stats, "pot@1", "greedy", guessed=measured)


def test_a_cheaper_configuration_no_worse_anywhere_dominates() -> None:
    stats = problems({"greedy": [1, 0, 1], "pot@1": [1, 0, 1], "sc@4": [1, 1, 1]})
    assert dominates(stats, "pot@1", "greedy")
    assert not dominates(stats, "greedy", "pot@1")  # dearer
    assert not dominates(stats, "sc@4", "greedy")  # better but dearer: that needs the margin


def test_the_ladder_climbs_only_where_a_configuration_pays_and_never_falls() -> None:
    # pot@4 clearly beats pot@1 from low up; sc@4 is noise above pot@4 (wins on one problem, loses on one).
    stats = problems({
        "greedy": [0, 0, 0, 0, 0, 0],
        "pot@1": [1, 1, 0, 0, 1, 0],
        "pot@4": [1, 1, 1, 1, 1, 0],
        "sc@4": [1, 1, 1, 0, 1, 1],
        "sc@8": [0, 0, 0, 0, 0, 0],
    })  # fmt: skip
    chosen = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy"))
    assert chosen == {"none": "pot@1", "minimal": "pot@1", "low": "pot@4", "medium": "pot@4", "high": "pot@4"}
    accuracy = [sum(s.configs[chosen[e]].accuracy for s in stats) for e in BUDGETS]
    assert accuracy == sorted(accuracy)


def test_the_plain_maximum_would_have_stepped_to_the_noise() -> None:
    """With no margin (z=0) any positive mean moves the route, one lucky problem at a time; with
    the margin the route moves only where the gain is beyond one standard error."""
    stats = problems({
        "greedy": [0, 0, 0, 0], "pot@1": [1, 0, 0, 0], "pot@4": [1, 1, 0, 0], "sc@4": [1, 1, 1, 0],
        "sc@8": [0, 0, 0, 0],
    })  # fmt: skip
    loose = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy", z=0.0))
    strict = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy"))
    assert loose["minimal"] == "pot@1" and loose["medium"] == "sc@4"
    assert strict["minimal"] == "pot@1"  # not by the margin, but it dominates greedy (cheaper, never worse)
    assert strict["low"] == "pot@1"  # pot@4 wins one problem more: not beyond the margin
    assert strict["medium"] == "sc@4"  # two problems more than pot@1: beyond it


def test_a_small_group_inherits_its_parents_choice() -> None:
    # Three problems where sc@4 edges pot@4 by one problem: not enough to leave the parent's pot@4.
    stats = problems({
        "greedy": [0, 0, 0], "pot@1": [0, 0, 0], "pot@4": [1, 0, 0], "sc@4": [1, 1, 0], "sc@8": [1, 1, 0],
    })  # fmt: skip
    parent = {"none": "greedy", "minimal": "pot@1", "low": "pot@4", "medium": "pot@4", "high": "pot@4"}
    chosen = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy", parent=parent))
    assert chosen["low"] == "pot@4" and chosen["medium"] == "pot@4" and chosen["high"] == "pot@4"
    alone = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy", z=0.0))
    assert alone["medium"] == "sc@4"  # without the parent and the margin, the one problem decides


def test_a_parent_choice_worse_here_than_the_climb_is_not_taken() -> None:
    stats = problems({
        "greedy": [0, 0, 0, 0], "pot@1": [1, 1, 1, 1], "pot@4": [0, 0, 0, 0], "sc@4": [0, 0, 0, 0],
        "sc@8": [0, 0, 0, 0],
    })  # fmt: skip
    parent = {"none": "greedy", "minimal": "greedy", "low": "pot@4", "medium": "pot@4", "high": "pot@4"}
    chosen = labels(choose_stable(stats, list(COST), BUDGETS, start="greedy", parent=parent))
    assert chosen["minimal"] == "pot@1"  # beats the inherited greedy by the margin
    assert chosen["low"] == chosen["high"] == "pot@1"  # pot@4 would step down here


def test_nothing_fits_the_first_budget_gives_the_cheapest() -> None:
    stats = problems({"greedy": [1, 0], "pot@1": [0, 0], "pot@4": [1, 1], "sc@4": [1, 1], "sc@8": [1, 1]})
    chosen = choose_stable(stats, list(COST), {"minimal": 10.0}, start="greedy")
    assert chosen["minimal"].config == "pot@1" and chosen["minimal"].tokens == pytest.approx(60.0)


def test_the_plain_rule_buys_the_best_accuracy_within_the_budget() -> None:
    stats = problems({"greedy": [1, 0, 0, 0], "pot@4": [1, 1, 0, 0], "sc@8": [1, 1, 1, 1]})
    budgets = effort_budgets(stats, "greedy", {"low": 2.0, "high": 8.0})
    assert budgets == {"low": 200.0, "high": 800.0}
    assert best(stats, ["greedy", "pot@4", "sc@8"], budgets["low"]).config == "pot@4"  # sc@8 does not fit
    assert best(stats, ["greedy", "pot@4", "sc@8"], budgets["high"]).config == "sc@8"
    tied = problems({"greedy": [1, 1], "pot@1": [1, 1]})
    assert best(tied, ["greedy", "pot@1"], 1000.0).config == "pot@1"  # equal accuracy: fewer tokens
    assert best(stats, ["pot@4", "sc@8"], 10.0).config == "pot@4"  # nothing fits: the cheapest
