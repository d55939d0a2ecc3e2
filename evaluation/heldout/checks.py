"""The Must-show checks on a ladder priced on the development split (:mod:`~.ladder`) or
measured there through the gateway: what the effort ladder must show on problems its fit never
saw (enough of them, no step down, routed within 3 points of the best fixed configuration within
budget in every task kind, a higher effort that pays), each a pass or a miss with the numbers it
was decided on (pure).

A check on a group with no development problems is a miss that says so: an absent split never
reads as a pass. Accuracies are fractions; the lines print them in points.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.heldout.ladder import ALL, Summary

EPS = 1e-9
LADDER_MARGIN = 0.30  # high over none, overall and on the named families
STEP_TOLERANCE = 0.02  # no step down by more than this from one effort to the next
BEST_TOLERANCE = 0.03  # routed within this of the best fixed configuration within budget
NEW_FAMILY_KINDS = ("counting", "conversion", "logic")


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"- **{'pass' if self.passed else 'MISS'}**: {self.name}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pts(x: float) -> str:
    return f"{100 * x:.1f}"


def _ci(s: Summary) -> str:
    return f"{_pts(s.accuracy)} [{_pts(s.interval[0])}, {_pts(s.interval[1])}] (n={s.problems})"


def _row(groups: Mapping[str, Mapping[str, Any]], group: str, effort: str) -> Summary | None:
    row: Summary | None = groups.get(group, {}).get("routed", {}).get(effort)
    return row if row is not None and row.problems else None


def above(groups: Mapping[str, Mapping[str, Any]], group: str, upper: str, lower: str, margin: float,
          disjoint: bool) -> tuple[bool, str]:  # fmt: skip
    """Whether ``upper`` is at least ``margin`` above ``lower`` in ``group`` (and, if asked,
    their intervals are disjoint, ``upper``'s above), with the figures."""
    hi, lo = _row(groups, group, upper), _row(groups, group, lower)
    if hi is None or lo is None:
        return False, f"{group}: no development problems priced at {upper} and {lower}"
    gain = hi.accuracy - lo.accuracy
    ok = gain >= margin - EPS and (not disjoint or hi.interval[0] > lo.interval[1])
    return ok, f"{group}: {upper} {_ci(hi)} vs {lower} {_ci(lo)}, +{_pts(gain)} points"


def high_over_none(groups: Mapping[str, Mapping[str, Any]]) -> Check:
    ok, detail = above(groups, ALL, "high", "none", LADDER_MARGIN, disjoint=True)
    return Check(f"high >= none + {_pts(LADDER_MARGIN)} points overall, intervals disjoint", ok, detail)


def no_step_down(groups: Mapping[str, Mapping[str, Any]], efforts: Sequence[str]) -> Check:
    """In every task kind, no effort's accuracy below the previous one's by more than the tolerance."""
    worst: list[str] = []
    bad: list[str] = []
    for group in [g for g in groups if g != ALL]:
        rows = [r for e in efforts if (r := _row(groups, group, e)) is not None]
        steps = [(b.accuracy - a.accuracy, a.name, b.name) for a, b in itertools.pairwise(rows)]
        if not steps:
            continue
        drop, a, b = min(steps)
        worst.append(f"{group} {_pts(drop)} ({a}->{b})")
        if drop < -STEP_TOLERANCE - EPS:
            bad.append(group)
    detail = ("steps down beyond the tolerance in " + ", ".join(bad) + "; " if bad else "") + (
        "worst step per kind: " + "; ".join(worst) if worst else "no task kind has two priced efforts"
    )
    return Check(f"none..xhigh: no step down > {_pts(STEP_TOLERANCE)} points in any task kind",
                 bool(worst) and not bad, detail)  # fmt: skip


def high_over_low_somewhere(groups: Mapping[str, Mapping[str, Any]]) -> Check:
    found: list[str] = []
    closest: list[str] = []
    for group in [g for g in groups if g != ALL]:
        ok, detail = above(groups, group, "high", "low", EPS, disjoint=True)
        (found if ok else closest).append(detail)
    detail = "; ".join(found) if found else "none: " + "; ".join(closest)
    return Check(">= 1 task kind where high > low with disjoint intervals", bool(found), detail)


def nothing_pays_past_low(groups: Mapping[str, Mapping[str, Any]]) -> Check:
    """The alternative to a kind where ``high`` beats ``low``: in no task kind does any
    fixed configuration measured, at any cost, beat what ``low`` routes to with disjoint 95%
    intervals. Then more budget has nothing to buy, and the frontier plot shows it; a kind where
    something does beat ``low`` is named with the configuration, so the ladder is at fault there."""
    paying: list[str] = []
    closest: list[str] = []
    kinds = [g for g in groups if g != ALL]
    for group in kinds:
        low = _row(groups, group, "low")
        fixed: list[Summary] = [f for f in groups[group].get("fixed", []) if f.problems]
        if low is None or not fixed:
            paying.append(f"{group}: low or the fixed configurations not priced")
            continue
        best = max(fixed, key=lambda f: (f.interval[0], f.accuracy))
        detail = f"{group}: `{best.name}` {_ci(best)} vs low {_ci(low)}"
        (paying if best.interval[0] > low.interval[1] + EPS else closest).append(detail)
    ok = bool(kinds) and not paying
    detail = ("pays past low in " + "; ".join(paying) if paying else "in no task kind; closest per kind: "
              + "; ".join(closest)) if kinds else "no task kind priced"  # fmt: skip
    return Check("or: no configuration measured beats low's routes with disjoint intervals (frontier plots)",
                 ok, detail)  # fmt: skip


def kind_gap(groups: Mapping[str, Mapping[str, Any]], group: str, efforts: Sequence[str]) -> tuple[bool, str]:
    """One task kind: whether at every effort the routed accuracy is at most the tolerance below
    the best fixed configuration within that effort's budget on the kind's development problems,
    and its largest gap (routed minus best) with the figures it was read on."""
    gaps, unpriced = [], []
    for effort in efforts:
        routed, best = _row(groups, group, effort), groups.get(group, {}).get("best_fixed", {}).get(effort)
        if routed is None or best is None:
            unpriced.append(effort)
        else:
            gaps.append((routed.accuracy - best.summary.accuracy, effort, routed, best))
    missing = f" (not priced at {', '.join(unpriced)})" if unpriced else ""
    if not gaps:
        return False, f"{group}: nothing priced{missing}"
    gap, effort, routed, best = min(gaps, key=lambda g: g[0])
    fits = "" if best.fits else ", nothing fits: cheapest"
    detail = (f"{group} {'+' if gap >= 0 else ''}{_pts(gap)} at {effort} (routed {_pts(routed.accuracy)} vs "
              f"`{best.config}` {_pts(best.summary.accuracy)}{fits}){missing}")  # fmt: skip
    return not unpriced and gap >= -BEST_TOLERANCE - EPS, detail


def routed_near_best(groups: Mapping[str, Mapping[str, Any]], efforts: Sequence[str]) -> Check:
    """In every task kind, at every effort, the routed accuracy at most the tolerance below the
    best fixed configuration within that effort's budget, on the kind's own development problems
    (the configurations priced on every problem of the kind compete: code ones on code, text
    ones on text). Not overall: one greedy sample is the only configuration priced on code and
    text problems alike, so the overall best fixed is greedy and routing never falls short of it.
    Each kind's largest gap is reported; a kind more than the tolerance short is a miss."""
    kinds = [g for g in groups if g != ALL]
    results = [(group, *kind_gap(groups, group, efforts)) for group in kinds]
    bad = [group for group, ok, _ in results if not ok]
    detail = ("misses in " + ", ".join(bad) + "; " if bad else "") + (
        "largest gap per kind: " + "; ".join(d for _, _, d in results) if results else "no task kind priced"
    )
    name = f"per task kind: routed within {_pts(BEST_TOLERANCE)} points of the best fixed configuration within budget"
    return Check(f"{name} at every effort", bool(results) and not bad, detail)


def new_families(groups: Mapping[str, Mapping[str, Any]], kinds: Sequence[str] = NEW_FAMILY_KINDS) -> Check:
    results = [above(groups, kind, "high", "none", LADDER_MARGIN, disjoint=False) for kind in kinds]
    return Check(f"{', '.join(kinds)}: high >= none + {_pts(LADDER_MARGIN)} points in each",
                 all(ok for ok, _ in results), "; ".join(d for _, d in results))  # fmt: skip


def coverage(drawn: int, intended: int | None, missing_families: Sequence[str]) -> Check:
    """How much of the development split is drawn (the ladder is judged on >= 200 problems)."""
    of = f" of {intended}" if intended else ""
    gaps = f"; families with no development problem yet: {', '.join(missing_families)}" if missing_families else ""
    return Check(">= 200 development problems", drawn >= 200, f"development: {drawn}{of} drawn{gaps}")


def all_checks(
    groups: Mapping[str, Mapping[str, Any]], efforts: Sequence[str], drawn: int, intended: int | None,
    missing_families: Sequence[str],
) -> list[Check]:  # fmt: skip
    return [
        coverage(drawn, intended, missing_families),
        high_over_none(groups),
        no_step_down(groups, efforts),
        high_over_low_somewhere(groups),
        nothing_pays_past_low(groups),
        routed_near_best(groups, efforts),
        new_families(groups),
    ]
