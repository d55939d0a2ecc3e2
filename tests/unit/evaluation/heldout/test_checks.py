"""The Must-show checks compute what they say: margins and disjoint intervals at their
boundaries, the worst step per kind, best-fixed gaps, and absent kinds reading as misses."""

from __future__ import annotations

from typing import Any

from evaluation.heldout.checks import (
    all_checks,
    coverage,
    high_over_low_somewhere,
    high_over_none,
    new_families,
    no_step_down,
    nothing_pays_past_low,
    routed_near_best,
)
from evaluation.heldout.ladder import ALL, BestFixed, Summary

EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]


def row(name: str, accuracy: float, low: float | None = None, high: float | None = None, n: int = 50) -> Summary:
    low = accuracy - 0.05 if low is None else low
    high = accuracy + 0.05 if high is None else high
    return Summary(name, n, accuracy, (low, high), 100.0, 50.0, 112.5, 1.0)


def group(accuracies: dict[str, float], best: dict[str, float] | None = None, **intervals: Any) -> dict[str, Any]:
    routed = {e: row(e, a, *intervals.get(e, (None, None))) for e, a in accuracies.items()}
    fixed = {e: BestFixed(e, 100.0, [ALL], "sc@4", True, 3, row("sc@4", a)) for e, a in (best or {}).items()}
    return {"problems": 50, "routed": routed, "fixed": [], "best_fixed": fixed}


def ladder_of(*values: float) -> dict[str, float]:
    return dict(zip(EFFORTS, values, strict=True))


def test_high_over_none_needs_thirty_points_and_disjoint_intervals() -> None:
    assert high_over_none({ALL: group(ladder_of(0.2, 0.3, 0.4, 0.5, 0.5, 0.5))}).passed
    assert not high_over_none({ALL: group(ladder_of(0.2, 0.3, 0.4, 0.49, 0.49, 0.5))}).passed  # 29 points
    overlapping = group(ladder_of(0.2, 0.3, 0.4, 0.5, 0.6, 0.6), high=(0.3, 0.9), none=(0.0, 0.35))
    check = high_over_none({ALL: overlapping})
    assert not check.passed and "+40.0 points" in check.detail
    assert not high_over_none({"arithmetic": group(ladder_of(0.1, 0.1, 0.1, 0.1, 0.9, 0.9))}).passed  # no "all"


def test_a_step_down_beyond_two_points_in_any_kind_is_a_miss_and_named() -> None:
    fine = group(ladder_of(0.5, 0.48, 0.6, 0.6, 0.7, 0.7))  # 2 points down: allowed
    dips = group(ladder_of(0.5, 0.6, 0.57, 0.6, 0.7, 0.7))  # 3 points down
    assert no_step_down({"arithmetic": fine, ALL: dips}, EFFORTS).passed  # "all" is not a task kind
    check = no_step_down({"arithmetic": fine, "logic": dips}, EFFORTS)
    assert not check.passed and "logic" in check.detail and "-3.0 (minimal->low)" in check.detail
    assert not no_step_down({}, EFFORTS).passed  # nothing measured is no pass


def test_one_kind_with_high_above_low_and_disjoint_intervals_suffices() -> None:
    flat = group(ladder_of(0.5, 0.5, 0.5, 0.5, 0.5, 0.5))
    climbs = group(ladder_of(0.1, 0.1, 0.2, 0.5, 0.8, 0.8), low=(0.1, 0.3), high=(0.6, 0.9))
    assert high_over_low_somewhere({"word": flat, "counting": climbs, ALL: flat}).passed
    assert not high_over_low_somewhere({"word": flat, ALL: climbs}).passed


def test_nothing_pays_past_low_unless_a_fixed_configuration_beats_it_with_disjoint_intervals() -> None:
    flat = group(ladder_of(0.1, 0.4, 0.5, 0.5, 0.5, 0.5), low=(0.4, 0.6))
    flat["fixed"] = [row("pot@8", 0.65, 0.55, 0.75), row("sc@2", 0.3, 0.2, 0.4)]  # overlaps low's interval
    check = nothing_pays_past_low({"word": flat, ALL: flat})
    assert check.passed and "closest per kind: word: `pot@8` 65.0 [55.0, 75.0]" in check.detail
    pays = group(ladder_of(0.1, 0.4, 0.5, 0.5, 0.5, 0.5), low=(0.4, 0.6))
    pays["fixed"] = [row("hybrid@8+cot4", 0.8, 0.65, 0.9)]  # its whole interval above low's
    check = nothing_pays_past_low({"word": flat, "math": pays, ALL: flat})
    assert not check.passed and check.detail.startswith("pays past low in math: `hybrid@8+cot4` 80.0")
    unpriced = group(ladder_of(0.1, 0.4, 0.5, 0.5, 0.5, 0.5))  # no fixed configuration priced
    assert not nothing_pays_past_low({"word": unpriced}).passed
    assert not nothing_pays_past_low({ALL: flat}).passed  # no task kind is no pass


def test_routed_within_three_points_of_the_best_fixed_in_every_kind_at_every_effort() -> None:
    acc = ladder_of(0.2, 0.3, 0.4, 0.5, 0.6, 0.6)
    near = group(acc, best={**{e: a + 0.01 for e, a in acc.items()}, "high": 0.63})  # 3 points short: within
    check = routed_near_best({"arithmetic": near, "word": near}, EFFORTS)
    assert check.passed and check.name.startswith("per task kind: routed within 3.0 points")
    assert check.detail == ("largest gap per kind: arithmetic -3.0 at high (routed 60.0 vs `sc@4` 63.0); "
                            "word -3.0 at high (routed 60.0 vs `sc@4` 63.0)")  # fmt: skip


def test_one_kind_more_than_three_points_short_is_a_miss_named_with_its_gap() -> None:
    acc = ladder_of(0.2, 0.3, 0.4, 0.5, 0.6, 0.6)
    near = group(acc, best=dict(acc))
    code = group(acc, best={**acc, "high": 0.73})  # code_execution priced 13 points above the routed high
    check = routed_near_best({"arithmetic": near, "code": code, ALL: near}, EFFORTS)
    assert not check.passed
    assert check.detail.startswith("misses in code; largest gap per kind: arithmetic +0.0 at none")
    assert "code -13.0 at high (routed 60.0 vs `sc@4` 73.0)" in check.detail
    barely = group(acc, best={**acc, "medium": 0.5301})
    assert not routed_near_best({"word": barely}, EFFORTS).passed


def test_overall_alone_is_no_pass_and_an_unpriced_effort_is_a_miss() -> None:
    """Overall the best fixed is greedy (the one configuration priced on code and text alike),
    so "all" is not judged: with no task kind there is nothing to pass."""
    acc = ladder_of(0.2, 0.3, 0.4, 0.5, 0.6, 0.6)
    assert not routed_near_best({ALL: group(acc, best=dict(acc))}, EFFORTS).passed
    check = routed_near_best({"word": group(acc, best={"none": 0.2})}, EFFORTS)
    assert not check.passed and "word +0.0 at none" in check.detail
    assert "(not priced at minimal, low, medium, high, xhigh)" in check.detail
    assert routed_near_best({"word": group(acc)}, EFFORTS).detail.startswith("misses in word; largest gap per kind: "
                                                                             "word: nothing priced")  # fmt: skip


def test_the_new_families_each_need_thirty_points_and_an_absent_kind_is_a_miss() -> None:
    climbs, flat = group(ladder_of(0.1, 0.2, 0.3, 0.4, 0.4, 0.5)), group(ladder_of(0.1, 0.1, 0.1, 0.1, 0.3, 0.3))
    assert new_families({"counting": climbs, "conversion": climbs, "logic": climbs}).passed
    assert not new_families({"counting": climbs, "conversion": flat, "logic": climbs}).passed
    check = new_families({"counting": climbs, "conversion": climbs})
    assert not check.passed and "logic: no development problems" in check.detail


def test_coverage_states_what_is_missing() -> None:
    check = coverage(40, 224, ["knights_knaves"])
    assert not check.passed and check.detail == (
        "development: 40 of 224 drawn; families with no development problem yet: knights_knaves"
    )
    assert coverage(200, 224, []).passed
    assert [c.line().split(":")[0] for c in all_checks({}, EFFORTS, 0, None, [])] == ["- **MISS**"] * 7
