"""Leave one family out: the routed ladder summarized per effort on families the fit never saw (pure).

A routing table fitted on every calibration family but one is routed on the left-out family's
problems; each problem's row says, per effort, the configuration its route runs, whether the pools
price it there, its priced accuracy and generated tokens and its candidates: the mean drawn where
the pricing replays a route that stops on its own candidates (the adaptive vote), else how many the
route asks for (the rows of :func:`evaluation.heldout.ladder.per_problem`, with ``candidates``
completed by :func:`with_candidates`). This module turns such rows into one line per effort:
accuracy with its 95% interval over problems
(:func:`evaluation.stats.intervals.bootstrap_interval`), candidates and generated tokens as mean and
standard deviation, and the problems whose route the pools cannot price (a tree strategy measured
only live, a text configuration on a code problem), counted and left out of the means, never scored
as wrong. The same summary reads the committed development report's rows, so a left-out family's
figure stands beside its in-family one on the very same problems (:func:`paired_difference`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evaluation.stats.intervals import bootstrap_interval

Row = Mapping[str, Any]  # one problem: id, family, kind, task_type, efforts -> {config, priced, accuracy, ...}


@dataclass(frozen=True)
class Spread:
    """Mean and standard deviation over problems (``None`` when nothing was measured)."""

    mean: float | None
    sd: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(None, None)
        return cls(float(np.mean(values)), float(np.std(values)))


@dataclass(frozen=True)
class EffortSummary:
    """One effort over a set of problems: priced ones averaged, the rest counted."""

    effort: str
    problems: int  # rows given
    priced: int  # rows whose route the pools price
    accuracy: float | None
    interval: tuple[float, float] | None
    candidates: Spread  # over every row with a route (an unpriced route still asks for its candidates)
    generated_tokens: Spread  # over the priced rows
    configs: dict[str, int]  # configuration label -> rows routed to it, most first

    @property
    def unpriced(self) -> int:
        return self.problems - self.priced

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"unpriced": self.unpriced}


def candidates_of(route: Mapping[str, Any]) -> int:
    """Candidates a gateway route asks for: its ``n``, plus the chains of thought a hybrid
    program-of-thought votes with. Early stopping may draw fewer; this is what it may spend."""
    params = route.get("params") or {}
    return int(route.get("n") or 1) + int(params.get("cot") or 0)


def with_candidates(rows: Sequence[Row], routes: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """``rows`` with each effort's ``candidates``: the mean drawn where the pricing replayed it
    (an adaptive route stops early on its own candidates), else what the route in ``routes``
    (effort -> problem id -> route) asks for."""
    out = []
    for row in rows:
        efforts = {
            effort: dict(entry) | {"candidates": candidates_of(routes[effort][row["id"]])}
            if row["id"] in routes.get(effort, {}) and "candidates" not in entry else dict(entry)
            for effort, entry in row["efforts"].items()
        }  # fmt: skip
        out.append(dict(row) | {"efforts": efforts})
    return out


def summarize(rows: Sequence[Row], effort: str, seed: int = 0) -> EffortSummary:
    """``effort``'s line over ``rows`` (see the module docstring)."""
    entries = [row["efforts"][effort] for row in rows if effort in row["efforts"]]
    priced = [e for e in entries if e.get("priced")]
    accuracy = [float(e["accuracy"]) for e in priced]
    counts: dict[str, int] = {}
    for e in entries:
        counts[str(e.get("config"))] = counts.get(str(e.get("config")), 0) + 1
    return EffortSummary(
        effort=effort, problems=len(entries), priced=len(priced),
        accuracy=float(np.mean(accuracy)) if accuracy else None,
        interval=bootstrap_interval(accuracy, seed=seed) if accuracy else None,
        candidates=Spread.of([float(e["candidates"]) for e in entries if "candidates" in e]),
        generated_tokens=Spread.of([float(e["generated_tokens"]) for e in priced]),
        configs=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
    )  # fmt: skip


def by_effort(rows: Sequence[Row], efforts: Sequence[str], seed: int = 0) -> dict[str, EffortSummary]:
    """:func:`summarize` for every effort, in order."""
    return {effort: summarize(rows, effort, seed) for effort in efforts}


@dataclass(frozen=True)
class Paired:
    """Left-out minus in-family accuracy on the problems both price, with its 95% bootstrap
    interval over problems (negative: the routing did worse without the family)."""

    effort: str
    problems: int
    difference: float | None
    interval: tuple[float, float] | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_difference(left_out: Sequence[Row], in_family: Sequence[Row], effort: str, seed: int = 0,
                      resamples: int = 2000) -> Paired:  # fmt: skip
    """:class:`Paired` for ``effort``, matching rows by problem id."""
    theirs = {row["id"]: row["efforts"].get(effort, {}) for row in in_family}
    diffs = []
    for row in left_out:
        mine, other = row["efforts"].get(effort, {}), theirs.get(row["id"], {})
        if mine.get("priced") and other.get("priced"):
            diffs.append(float(mine["accuracy"]) - float(other["accuracy"]))
    if not diffs:
        return Paired(effort, 0, None, None)
    data = np.asarray(diffs)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    interval = (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
    return Paired(effort, len(diffs), float(data.mean()), interval)
