"""The cost-vs-accuracy frontier per task kind: is the ladder on it?

Pure: priced per-problem stats in, points out (no pools, no plotting). Every fixed
configuration priced on all problems of a task kind becomes one point (mean cost, mean
accuracy with a 95% bootstrap interval over the problems); the Pareto frontier is the points no
other point beats on both axes. Cost is calibration's: generated + ``prefill_weight`` x prompt
tokens (``ConfigStats.tokens``), the same number the routing fit budgets with, so a ladder point
below the frontier means the fit left accuracy on the table at that cost.

A ladder point is what one effort buys on the task kind when routed by a given table: each
problem takes the configuration its effort and difficulty bin route it to (the fit's
per-problem predictions), so a binned task kind's point can mix configurations and sit off
every fixed configuration's point.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evaluation.routing.types import PREFILL_WEIGHT, ProblemStats
from evaluation.stats.intervals import bootstrap_interval

TOLERANCE = 1e-9  # cost or accuracy differences below this are ties (float means of the same values)


@dataclass(frozen=True)
class Point:
    """One configuration (or one effort's mix of them) on one task kind: means over ``problems``."""

    label: str
    cost: float
    accuracy: float
    low: float
    high: float
    generated: float
    prompt: float
    problems: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LadderPoint:
    """What one effort buys on a task kind: its point, the configurations it routes the kind's
    problems to (label -> problems) and whether no fixed configuration beats it on both axes."""

    effort: str
    point: Point
    configs: dict[str, int]
    on_frontier: bool

    def as_dict(self) -> dict[str, Any]:
        return {"effort": self.effort, **self.point.as_dict(), "configs": self.configs, "on_frontier": self.on_frontier}


def _point(label: str, accuracy: Sequence[float], generated: Sequence[float], prompt: Sequence[float],
           prefill_weight: float, seed: int) -> Point:  # fmt: skip
    low, high = bootstrap_interval(accuracy, seed=seed)
    gen, pro = float(np.mean(generated)), float(np.mean(prompt))
    return Point(label, gen + prefill_weight * pro, float(np.mean(accuracy)), low, high, gen, pro, len(accuracy))


def config_points(
    stats: Sequence[ProblemStats], *, prefill_weight: float = PREFILL_WEIGHT, seed: int = 0
) -> list[Point]:
    """One point per configuration priced on every one of ``stats`` (one priced on a few
    problems only would be compared on easier or harder ground), sorted by cost then label."""
    if not stats:
        return []
    common = set(stats[0].configs).intersection(*(s.configs for s in stats[1:]))
    points = []
    for label in common:
        cs = [s.configs[label] for s in stats]
        points.append(_point(label, [c.accuracy for c in cs], [c.generated_tokens for c in cs],
                             [c.prompt_tokens for c in cs], prefill_weight, seed))  # fmt: skip
    return sorted(points, key=lambda p: (p.cost, p.label))


def dominates(a: Point, b: Point) -> bool:
    """``a`` costs no more and is no less accurate than ``b``, and is strictly better on one axis."""
    no_worse = a.cost <= b.cost + TOLERANCE and a.accuracy >= b.accuracy - TOLERANCE
    better = a.cost < b.cost - TOLERANCE or a.accuracy > b.accuracy + TOLERANCE
    return no_worse and better


def pareto(points: Sequence[Point]) -> list[Point]:
    """The points no other point dominates, by rising cost (and so rising accuracy). Exact ties
    (same cost and accuracy) all stay: neither beats the other."""
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    return sorted(front, key=lambda p: (p.cost, -p.accuracy, p.label))


def ladder_points(
    predictions: Sequence[Mapping[str, Any]], frontier: Sequence[Point], *,
    prefill_weight: float = PREFILL_WEIGHT, seed: int = 0,
) -> list[LadderPoint]:  # fmt: skip
    """Per effort (in the predictions' order), the mean outcome of the configuration each problem
    is routed to. ``predictions``: ``route_fit.Fit.predictions`` rows of one task kind, each with
    ``efforts: {effort: {config, accuracy, generated_tokens, prompt_tokens}}``; an effort whose
    route was not priced on a problem (no outcome) is left out rather than counted as zero."""
    efforts = list(dict.fromkeys(e for p in predictions for e in p["efforts"]))
    out = []
    for effort in efforts:
        outcomes = [p["efforts"][effort] for p in predictions if "accuracy" in p["efforts"].get(effort, {})]
        if not outcomes:
            continue
        configs = Counter(str(o["config"]) for o in outcomes)
        label = next(iter(configs)) if len(configs) == 1 else "+".join(sorted(configs))
        accuracy = [float(o["accuracy"]) for o in outcomes]
        generated = [float(o["generated_tokens"]) for o in outcomes]
        prompt = [float(o["prompt_tokens"]) for o in outcomes]
        point = _point(label, accuracy, generated, prompt, prefill_weight, seed)
        on = not any(dominates(f, point) for f in frontier)
        out.append(LadderPoint(effort, point, dict(sorted(configs.items())), on))
    return out


@dataclass(frozen=True)
class KindFrontier:
    """One task kind: every fixed configuration's point, the frontier, the ladder's points."""

    task: str
    problems: int
    points: list[Point]
    frontier: list[Point]
    ladder: list[LadderPoint]

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "problems": self.problems,
            "frontier": [p.label for p in self.frontier],
            "points": [p.as_dict() for p in self.points],
            "ladder": [lp.as_dict() for lp in self.ladder],
        }


def by_task(
    stats: Sequence[ProblemStats], predictions: Sequence[Mapping[str, Any]], *,
    prefill_weight: float = PREFILL_WEIGHT, seed: int = 0, key: str = "task_type",
) -> list[KindFrontier]:  # fmt: skip
    """One :class:`KindFrontier` per task kind of ``predictions``, matched to ``stats`` by problem
    id. ``key`` names the grouping field: ``task_type`` (the gateway classifier's, as route_fit
    groups) on calibration, ``kind`` (the problem set's) for the development report."""
    task_of = {str(p["id"]): str(p[key]) for p in predictions}
    out = []
    for task in sorted(set(task_of.values())):
        members = [s for s in stats if task_of.get(s.problem_id) == task]
        points = config_points(members, prefill_weight=prefill_weight, seed=seed)
        front = pareto(points)
        mine = [p for p in predictions if str(p[key]) == task]
        ladder = ladder_points(mine, front, prefill_weight=prefill_weight, seed=seed)
        out.append(KindFrontier(task, len(members), points, front, ladder))
    return out
