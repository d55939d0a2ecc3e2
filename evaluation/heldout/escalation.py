"""Escalation priced from two models' pools: the small model alone, the large alone, the cascade.

Escalation pays when, on development problems of at least 4 families, the cascade comes within 3
points of the large model's accuracy, at fewer generated tokens and a lower p50 latency than the
large model alone, on the families where the large model is better; so each of the three is
reported with its accuracy, tokens and latency (95% intervals) and the share escalated.

Every figure here is on the same problems: those drawn for both models. The cascade is
:func:`evaluation.pricing.cascade.cascade` (the small model's configuration; below the vote-share
threshold, or with no answer, the large model's configuration answers too and both spends
count). "Large is better" is read on the point estimates of the family's problems, and the
verdict says so; the paired difference cascade - large comes with its own bootstrap interval
so a reader can see how much of a 3-point margin the data can resolve. Pure: pools in, a
plain dict out (:mod:`calibration.verbs.escalation` reads the pools and writes it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from evaluation.pools.store import ProblemPool
from evaluation.pricing.cascade import cascade
from evaluation.pricing.pricer import Config, Estimate, Pricer
from evaluation.stats.intervals import bootstrap_interval

MARGIN = 0.03  # the cascade may trail the large model by at most 3 points where the large is better
MIN_FAMILIES = 4


@dataclass(frozen=True)
class Arm:
    """One of the three ways to answer, over a group's problems."""

    name: str  # "small", "large" or "cascade"
    config: str
    accuracy: float
    low: float
    high: float
    generated: float
    prompt: float
    latency_mean_s: float
    latency_p50_s: float
    escalated: float


@dataclass(frozen=True)
class GroupReport:
    group: str  # a family, a task kind or "all"
    problems: int
    small: Arm
    large: Arm
    cascade: Arm
    cascade_minus_large: tuple[float, float, float]  # point, 95% low, 95% high (paired over problems)
    large_better: bool
    meets: bool | None  # None where the large model is not better (no target there)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _arm(name: str, config: str, estimates: Sequence[Estimate], seed: int) -> Arm:
    acc = [e.accuracy for e in estimates]
    low, high = bootstrap_interval(acc, seed=seed)
    m = len(estimates)
    return Arm(
        name=name, config=config, accuracy=sum(acc) / m, low=low, high=high,
        generated=sum(e.generated for e in estimates) / m, prompt=sum(e.prompt for e in estimates) / m,
        latency_mean_s=sum(e.latency_s for e in estimates) / m,
        latency_p50_s=float(np.median([e.latency_s for e in estimates])),
        escalated=sum(e.escalated for e in estimates) / m,
    )  # fmt: skip


def paired_difference(a: Sequence[float], b: Sequence[float], *, seed: int = 0,
                      resamples: int = 4000) -> tuple[float, float, float]:  # fmt: skip
    """Mean of a - b over problems with its 95% percentile bootstrap interval (problems resampled)."""
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if diff.size == 0:
        return (0.0, 0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    return (float(diff.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def verdict(small: Arm, large: Arm, cascaded: Arm, margin: float = MARGIN) -> tuple[bool, bool | None]:
    """(large better, target met): where the large model is better on the point estimate, the
    cascade must be within ``margin`` of its accuracy at fewer generated tokens and a lower p50."""
    large_better = large.accuracy > small.accuracy
    if not large_better:
        return False, None
    meets = (
        cascaded.accuracy >= large.accuracy - margin
        and cascaded.generated < large.generated
        and cascaded.latency_p50_s < large.latency_p50_s
    )
    return True, meets


@dataclass(frozen=True)
class CascadeSpec:
    """One cascade to price: each model's pricer (its own latency model) and configuration, and
    the confidence below which the small vote escalates."""

    small: Pricer
    large: Pricer
    small_config: Config
    large_config: Config
    threshold: float

    @property
    def name(self) -> str:
        return f"{self.small_config.name}->{self.large_config.name}@{self.threshold:g}"


def group_report(
    group: str, problems: Sequence[tuple[ProblemPool, ProblemPool]], spec: CascadeSpec, seed: int = 0
) -> GroupReport | None:
    """The three arms on one group's problems (pairs of the small and the large model's pool of
    one problem); ``None`` when no problem of the group has all three priced."""
    rows: list[tuple[Estimate, Estimate, Estimate]] = []
    for small_pool, large_pool in problems:
        alone = spec.small.estimate(small_pool, spec.small_config)
        big = spec.large.estimate(large_pool, spec.large_config)
        both = cascade(spec.small, spec.large, small_pool, large_pool, spec.small_config, spec.large_config,
                       spec.threshold)  # fmt: skip
        if alone is not None and big is not None and both is not None:
            rows.append((alone, big, both))
    if not rows:
        return None
    s = _arm("small", spec.small_config.name, [r[0] for r in rows], seed)
    la = _arm("large", spec.large_config.name, [r[1] for r in rows], seed)
    c = _arm("cascade", spec.name, [r[2] for r in rows], seed)
    diff = paired_difference([r[2].accuracy for r in rows], [r[1].accuracy for r in rows], seed=seed)
    large_better, meets = verdict(s, la, c)
    return GroupReport(group, len(rows), s, la, c, diff, large_better, meets)


def escalation_report(
    small_pools: Sequence[ProblemPool], large_pools: Sequence[ProblemPool], spec: CascadeSpec, seed: int = 0
) -> dict[str, object]:
    """Per family, per task kind and overall, on the problems both models have pools for, with
    the verdict: met when at least :data:`MIN_FAMILIES` families are measured and every
    family where the large model is better meets the target."""
    by_id = {p.id: p for p in large_pools}
    pairs = [(p, by_id[p.id]) for p in small_pools if p.id in by_id]
    families = sorted({p.family for p, _ in pairs})
    kinds = sorted({p.kind for p, _ in pairs})

    def report(group: str, chosen: list[tuple[ProblemPool, ProblemPool]]) -> GroupReport | None:
        return group_report(group, chosen, spec, seed)

    per_family = [r for f in families if (r := report(f, [q for q in pairs if q[0].family == f]))]
    per_kind = [r for k in kinds if (r := report(k, [q for q in pairs if q[0].kind == k]))]
    overall = report("all", pairs)
    better = [r for r in per_family if r.large_better]
    met = len(per_family) >= MIN_FAMILIES and all(r.meets for r in better)
    return {
        "small_config": spec.small_config.name,
        "large_config": spec.large_config.name,
        "threshold": spec.threshold,
        "problems": len(pairs),
        "families": [r.as_dict() for r in per_family],
        "kinds": [r.as_dict() for r in per_kind],
        "all": overall.as_dict() if overall else None,
        "verdict": {
            "families_measured": len(per_family),
            "families_large_better": [r.group for r in better],
            "families_missing_target": [r.group for r in better if not r.meets],
            "met": met,
        },
    }


def choose(reports: Sequence[dict[str, Any]], margin: float = MARGIN) -> int:
    """Index of the cascade to serve, picked on calibration reports: among those whose overall
    accuracy is within ``margin`` of the large model's at fewer generated tokens, the cheapest;
    when none is, the most accurate (ties: fewer tokens)."""
    if not reports:
        raise ValueError("no cascade to choose from")

    def arms(r: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return r["all"]["cascade"], r["all"]["large"]

    fits = [
        i for i, r in enumerate(reports)
        if r["all"] and arms(r)[0]["accuracy"] >= arms(r)[1]["accuracy"] - margin
        and arms(r)[0]["generated"] < arms(r)[1]["generated"]
    ]  # fmt: skip
    if fits:
        return min(fits, key=lambda i: arms(reports[i])[0]["generated"])
    scored = [i for i, r in enumerate(reports) if r["all"]]
    if not scored:
        return 0
    return max(scored, key=lambda i: (arms(reports[i])[0]["accuracy"], -arms(reports[i])[0]["generated"]))


def markdown(report: dict[str, object]) -> str:
    """The report as the docs show it: one row per group and arm."""
    lines = [
        f"small `{report['small_config']}`, large `{report['large_config']}`, escalate below confidence "
        f"{report['threshold']}; {report['problems']} problems drawn for both models",
        "",
        "| group | problems | arm | accuracy [95% CI] | generated tok | prompt tok | latency p50 / mean s "
        "| escalated |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups = [*report["families"], *report["kinds"], *([report["all"]] if report["all"] else [])]  # type: ignore[misc]
    for g in groups:
        for name in ("small", "large", "cascade"):
            a = g[name]
            esc = f"{a['escalated']:.0%}" if name == "cascade" else ""
            lines.append(
                f"| {g['group']} | {g['problems']} | {name} `{a['config']}` | {a['accuracy']:.3f} "
                f"[{a['low']:.3f}, {a['high']:.3f}] | {a['generated']:.0f} | {a['prompt']:.0f} | "
                f"{a['latency_p50_s']:.1f} / {a['latency_mean_s']:.1f} | {esc} |"
            )
        d = g["cascade_minus_large"]
        target = {None: "no target (large not better)", True: "met", False: "missed"}[g["meets"]]
        lines.append(f"| {g['group']} | | cascade - large | {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}] | | | | {target} |")
    v = report["verdict"]
    lines += ["", f"verdict: {v}"]
    return "\n".join(lines)
