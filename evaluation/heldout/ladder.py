"""The fitted effort ladder scored offline on pools the fit never saw (pure): the development
split's (``python -m calibration development``) or a left-out family's (``lofo``).

Routing is fitted on calibration pools only (:mod:`evaluation.routing.route_fit`); each scored
problem is then routed as the gateway routes its prompt (done by the caller:
:func:`calibration.lib.gateway_routes.route_questions`) and the route's configuration is priced on
that problem's own pool (:mod:`evaluation.pricing.pricer`).
So the ladder's figures are what a routed request would be expected to score on problems the
fit never saw (the development split's were looked at while the ladder was built, so they are
development figures, not held-out ones). Beside it stand every fixed configuration on the same
problems and, per effort, the best fixed configuration whose mean cost on them fits the effort's
budget: the budgets the fit used (``BUDGET_MULTIPLES`` x one greedy sample's mean cost, generated
+ ``PREFILL_WEIGHT`` x prompt tokens, on the calibration problems of each prompt's task type),
averaged over the group.

Configurations compete as in the fit: only those priced on every problem of a group (a
configuration for text answers cannot run a code problem), and ``none`` is one greedy sample.
A route the pools cannot price on a problem (its draws are missing) is counted, never dropped
silently. The Must-show checks on these figures are :mod:`evaluation.heldout.checks`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from evaluation.pools.store import ProblemPool, task_type_of
from evaluation.pricing.pricer import Config, Estimate
from evaluation.routing.route_choice import best
from evaluation.routing.route_fit import (
    GREEDY,
    NOT_ROUTABLE,
    budgets_for,
    covering,
    family_stats,
    label_of,
    problem_stats,
)
from evaluation.routing.served_routes import route_of
from evaluation.routing.types import PREFILL_WEIGHT, ProblemStats
from evaluation.stats.intervals import bootstrap_interval

ALL = "all"
DEFAULT = "default"  # the budgets of the default routes (task types calibration never saw)


# ------------------------------------------------------------------------------ routes -> labels
def route_key(route: Mapping[str, Any]) -> str:
    """What identifies the configuration a route runs: strategy, n, verifier and params (not
    its token budget or its ``expected``, which depend on the pools it was fitted on)."""
    params = {k: (float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v)
              for k, v in dict(route.get("params") or {}).items()}  # fmt: skip
    key = [route["strategy"], int(route.get("n") or 1), route.get("verifier") or None, params]
    return json.dumps(key, sort_keys=True)


def label_index(
    configs: Sequence[Config], pools: Sequence[ProblemPool], live: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, str]:
    """Route key -> the configuration's label, for every configuration a route can run, and
    for each live configuration's route (``live``: label -> route). Pools cannot price a live
    configuration, so a problem routed to one counts as unpriced (not measured on the scored
    pools), never wrong."""
    index = {route_key(route_of(c, pools)): label_of(c) for c in configs if c.family not in NOT_ROUTABLE}
    return index | {route_key(route): label for label, route in (live or {}).items()}


def routed_labels(
    routes: Mapping[str, Mapping[str, Mapping[str, Any]]], index: Mapping[str, str]
) -> dict[str, dict[str, str | None]]:
    """``effort -> problem id -> label`` of each route (``None``: no priced configuration runs it)."""
    return {effort: {pid: index.get(route_key(r)) for pid, r in per.items()} for effort, per in routes.items()}


# ------------------------------------------------------------------------------ outcomes
@dataclass(frozen=True)
class Outcomes:
    """Every configuration's priced outcome on every scored problem, by label."""

    stats: dict[str, ProblemStats]  # problem id -> configurations' accuracy and cost
    latency: dict[tuple[str, str], float]  # (problem id, label) -> latency estimate in seconds

    @classmethod
    def of(cls, pools: Sequence[ProblemPool], priced: Mapping[str, Mapping[str, Estimate]],
           configs: Sequence[Config], prefill_weight: float = PREFILL_WEIGHT) -> Outcomes:  # fmt: skip
        stats = problem_stats(pools, priced, configs, prefill_weight)
        latency = {(pid, label_of(c)): e.latency_s for c in configs for pid, e in priced.get(c.name, {}).items()}
        return cls({s.problem_id: s for s in stats}, latency)


@dataclass(frozen=True)
class Summary:
    """One row: an effort (routed) or a fixed configuration over a group's problems."""

    name: str
    problems: int  # problems it was priced on
    accuracy: float
    interval: tuple[float, float]
    generated_tokens: float
    prompt_tokens: float
    cost: float  # generated + PREFILL_WEIGHT x prompt tokens
    p50_latency_s: float | None
    configs: dict[str, int] = field(default_factory=dict)  # routed: label -> problems routed to it
    unpriced: int = 0  # problems whose route (or this configuration) the pools cannot price

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(name: str, pairs: Sequence[tuple[str, str | None]], outcomes: Outcomes, seed: int = 0) -> Summary:
    """The row of ``(problem id, label)`` pairs: means over the priced ones, the rest counted."""
    priced = [(pid, lab) for pid, lab in pairs if lab is not None and lab in outcomes.stats[pid].configs]
    measured = [outcomes.stats[pid].configs[lab] for pid, lab in priced]
    accuracy = [m.accuracy for m in measured]
    latencies = [outcomes.latency[(pid, lab)] for pid, lab in priced if (pid, lab) in outcomes.latency]
    counts: dict[str, int] = {}
    for _, lab in pairs:
        counts[str(lab)] = counts.get(str(lab), 0) + 1

    def mean(values: Sequence[float]) -> float:
        return float(np.mean(values)) if values else 0.0

    return Summary(
        name=name, problems=len(measured), accuracy=mean(accuracy), interval=bootstrap_interval(accuracy, seed=seed),
        generated_tokens=mean([m.generated_tokens for m in measured]),
        prompt_tokens=mean([m.prompt_tokens for m in measured]), cost=mean([m.tokens for m in measured]),
        p50_latency_s=float(np.median(latencies)) if latencies else None,
        configs=dict(sorted(counts.items(), key=lambda kv: -kv[1])), unpriced=len(pairs) - len(measured),
    )  # fmt: skip


# ------------------------------------------------------------------------------ budgets
def fit_budgets(
    calibration: Sequence[ProblemStats], pools: Sequence[ProblemPool], multiples: Mapping[str, float],
    min_task_problems: int = 1,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """The budgets the fit used (:func:`evaluation.routing.route_fit.fit`): per calibration task type, the
    multiples of its problems' mean greedy cost; for the default routes (task types calibration
    never saw), of the mean over families of the text problems' greedy cost."""
    task_of = {p.id: task_type_of(p) for p in pools}
    by_id = {s.problem_id: s for s in calibration}
    text = [by_id[p.id] for p in pools if "code" not in p.draws] or list(calibration)
    out = {DEFAULT: budgets_for(family_stats(text, {p.id: p.family for p in pools}), multiples)}
    for task in sorted(set(task_of.values())):
        members = [s for s in calibration if task_of[s.problem_id] == task]
        if len(members) >= min_task_problems:
            out[task] = budgets_for(members, multiples)
    return out


def problem_budgets(
    task_of: Mapping[str, str], budgets: Mapping[str, Mapping[str, float]]
) -> dict[str, tuple[str, Mapping[str, float]]]:
    """Per scored problem, the budgets its prompt's task type was fitted with (the default
    routes' budgets for a task type calibration never saw), and that key."""
    return {
        pid: (task, budgets[task]) if task in budgets else (DEFAULT, budgets[DEFAULT]) for pid, task in task_of.items()
    }


@dataclass(frozen=True)
class BestFixed:
    """The best fixed configuration within an effort's budget on a group's scored problems."""

    effort: str
    budget: float
    budget_from: list[str]  # the fit's budget keys (task types, "default") the mean is over
    config: str
    fits: bool  # False: nothing fits, this is the cheapest (calibration's fallback)
    competing: int  # configurations priced on every problem of the group
    summary: Summary

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def best_fixed(
    members: Sequence[ProblemStats], budgets: Mapping[str, tuple[str, Mapping[str, float]]],
    efforts: Sequence[str], outcomes: Outcomes, seed: int = 0,
) -> list[BestFixed]:  # fmt: skip
    """Per effort, calibration's choice rule (:func:`evaluation.routing.route_choice.best`) applied to the scored
    outcomes themselves: the oracle a routed ladder is measured against. The budget is the mean
    of the members' fitted budgets (a budget bounds a mean cost); ``none`` is greedy."""
    keys = sorted({budgets[m.problem_id][0] for m in members})
    candidates = covering(members)
    out = []
    for effort in efforts:
        budget = float(np.mean([budgets[m.problem_id][1][effort] for m in members])) if members else 0.0
        pool = [GREEDY] if effort == "none" and GREEDY in candidates else candidates
        if not pool:
            continue
        choice = best(members, pool, budget)
        pairs = [(m.problem_id, choice.config) for m in members]
        fits = effort == "none" or choice.tokens <= budget  # none is pinned, whatever it costs
        out.append(BestFixed(effort, budget, keys, choice.config, fits, len(candidates),
                             summarize(choice.config, pairs, outcomes, seed)))  # fmt: skip
    return out


# ------------------------------------------------------------------------------ the ladder
def groups_of(pools: Sequence[ProblemPool]) -> dict[str, list[str]]:
    """Problem ids per task kind (in order of first appearance) and ``all``."""
    out: dict[str, list[str]] = {}
    for p in pools:
        out.setdefault(p.kind, []).append(p.id)
    return {**out, ALL: [p.id for p in pools]}


def ladder(
    pools: Sequence[ProblemPool], labels: Mapping[str, Mapping[str, str | None]], outcomes: Outcomes,
    budgets: Mapping[str, tuple[str, Mapping[str, float]]], efforts: Sequence[str], seed: int = 0,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per group: the routed row per effort, every fixed configuration, the best fixed per effort."""
    every = sorted({lab for s in outcomes.stats.values() for lab in s.configs})
    out: dict[str, dict[str, Any]] = {}
    for group, ids in groups_of(pools).items():
        members = [outcomes.stats[pid] for pid in ids]
        routed = {e: summarize(e, [(pid, labels[e].get(pid)) for pid in ids], outcomes, seed) for e in efforts}
        fixed = [summarize(lab, [(pid, lab) for pid in ids], outcomes, seed) for lab in every]
        out[group] = {
            "problems": len(ids),
            "routed": routed,
            "fixed": [f for f in fixed if f.problems],
            "best_fixed": {b.effort: b for b in best_fixed(members, budgets, efforts, outcomes, seed)},
        }
    return out


def per_problem(
    pools: Sequence[ProblemPool], labels: Mapping[str, Mapping[str, str | None]], outcomes: Outcomes,
    task_of: Mapping[str, str], sources: Mapping[str, Mapping[str, str]] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each scored problem's routed configuration and priced outcome per effort (raw data);
    ``sources``: effort -> problem id -> the route's ``expected.source`` (which task type and
    bin of the table served it)."""
    rows = []
    for p in pools:
        efforts: dict[str, Any] = {}
        for effort, per in labels.items():
            label = per.get(p.id)
            c = outcomes.stats[p.id].configs.get(label or "")
            efforts[effort] = {"config": label, "priced": c is not None}
            if sources is not None and p.id in sources.get(effort, {}):
                efforts[effort]["route"] = sources[effort][p.id]
            if c is not None:
                efforts[effort] |= {"accuracy": c.accuracy, "generated_tokens": c.generated_tokens,
                                    "prompt_tokens": c.prompt_tokens, "cost": c.tokens,
                                    "latency_s": outcomes.latency.get((p.id, str(label)))}  # fmt: skip
                if c.candidates is not None:  # drawn, as replayed; else with_candidates gives the cap
                    efforts[effort]["candidates"] = c.candidates
        rows.append({"id": p.id, "family": p.family, "kind": p.kind, "task_type": task_of.get(p.id),
                     "pass1": outcomes.stats[p.id].pass1, "efforts": efforts})  # fmt: skip
    return rows
