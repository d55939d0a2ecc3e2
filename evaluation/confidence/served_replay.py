"""The served confidence of a routed run, predicted again offline by any confidence model.

A routed run through the gateway (``python -m calibration routed``) keeps each answer's
served ``ttc.confidence``, not the signals it came from, so a refitted model cannot be scored on
those answers directly. This replays each answered request's route (the configuration its
record names) on the problem's development pool, as the pricing does (same subsets, the served
early-stopping rule), and scores each model on the replays: every run of the configuration on
that problem weighs ``1 / runs``, so each answer weighs one, as in the live figure.

Scoring the model that served the run this way and comparing with the live ECE checks the
replay (the simulator); scoring a new model predicts what serving it would measure
(``python -m calibration served-replay``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.heldout.ladder import label_index, route_key
from evaluation.heldout.routed_plan import answers
from evaluation.pools.store import ProblemPool, prompt_text
from evaluation.pricing.pricer import Pricer, stop_rule
from evaluation.pricing.table import default_configs, fit_latency, judges_in
from evaluation.routing.route_fit import label_of
from evaluation.stats.calibration_metrics import bootstrap_ece, expected_calibration_error
from services.common.confidence import FEATURES, TASK_FEATURES, Calibrator
from services.common.confidence_prompt import with_prompt

STOP_CONFIDENCE = 0.9  # the served early-stopping confidence, as the routed run's report prices it
BOOTSTRAP = 1000


@dataclass(frozen=True)
class Replayed:
    """One replayed run of an answered request's configuration: the model's probability, verdict."""

    problem: str
    probability: float
    correct: bool
    weight: float


def answered(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The answers the live figure scores (``evaluation.heldout.routed_plan.served_calibration``): each
    answer once, with a served confidence."""
    return [r for r in answers(records) if r.get("confidence") is not None]


def widened(data: Mapping[str, Any]) -> dict[str, Any]:
    """A logistic model saved before the task-type features or the prompt prior, with zero weights
    on them: the same predictions, readable by this code (to score the model a past run was
    served by). Those models had a ``difficulty`` feature where ``prior`` is now, never fitted
    (no pool carried it, its weight 0), so it reads as the prior with weight 0."""
    old = list(data.get("features", []))
    if data.get("kind") != "logistic" or old == list(FEATURES):
        return dict(data)
    if "difficulty" in old:
        if data["coefficients"]["features"][old.index("difficulty")] != 0.0:
            raise ValueError("cannot read a fitted difficulty weight as the prior's")
        old[old.index("difficulty")] = "prior"
    missing = [f"task:{t}" for t in TASK_FEATURES if f"task:{t}" not in old]
    if old + missing != list(FEATURES):
        raise ValueError(f"cannot widen features {old} to {list(FEATURES)}")
    coefficients = dict(data["coefficients"]) | {"features": [*data["coefficients"]["features"], *[0.0] * len(missing)]}
    return dict(data) | {"features": list(FEATURES), "coefficients": coefficients}


def replay(answers: Sequence[Mapping[str, Any]], pools: Sequence[ProblemPool], model: Calibrator,
           *, seed: int = 0, limit: int = 64) -> tuple[list[Replayed], int]:  # fmt: skip
    """Every replayed run of every answer's configuration, scored by ``model``; and how many
    answers could not be replayed (no pool, or a route no priced configuration runs)."""
    k = max((len(d.sampled) for p in pools for d in p.draws.values()), default=0)
    configs = default_configs(k, judges_in(pools))
    index = label_index(configs, pools)
    by_label = {label_of(c): c for c in configs}
    by_id = {p.id: p for p in pools}
    pricer = Pricer(fit_latency(list(pools)), stop_rule(STOP_CONFIDENCE), limit=limit, seed=seed)
    out: list[Replayed] = []
    missed = 0
    for r in answers:
        pool, label = by_id.get(str(r["problem_id"])), index.get(route_key(r["route"]))
        config = by_label.get(label) if label is not None else None
        if pool is None or config is None or not config.applies(pool):
            missed += 1
            continue
        rng = random.Random(f"{seed}:{pool.id}:{config.name}")
        runs = [o for o in pricer.outcomes(pool, config, rng) if o.signals is not None]
        text = prompt_text(pool)
        out += [Replayed(pool.id, model.probability(with_prompt(o.signals, text, model)), o.correct, 1.0 / len(runs))
                for o in runs if o.signals is not None]  # fmt: skip
    return out, missed


def score(rows: Sequence[Replayed], *, seed: int = 0, resamples: int = BOOTSTRAP) -> dict[str, Any]:
    """ECE (10 bins) with a 95% bootstrap over problems, mean probability and accuracy."""
    probs, right, weights = [r.probability for r in rows], [r.correct for r in rows], [r.weight for r in rows]
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r.problem, []).append(i)
    members = list(groups.values())
    interval = bootstrap_ece(probs, right, weights, members, seed=seed, resamples=resamples)
    total = sum(weights)
    return {
        "ece": expected_calibration_error(probs, right, weights),
        "interval": list(interval),
        "mean_confidence": sum(p * w for p, w in zip(probs, weights, strict=True)) / total,
        "accuracy": sum(w for c, w in zip(right, weights, strict=True) if c) / total,
        "problems": len(members),
    }
