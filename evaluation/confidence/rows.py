"""The confidence model's training rows: configurations replayed on candidate pools.

Rows come from replaying configurations on each problem's pool, as the pricing does
(:mod:`evaluation.pricing.pricer`: the same configurations, the same ``n``-subsets drawn by the
same seeded generator), but keeping what the search would know at its end: the
:class:`~services.common.confidence.ConfidenceSignals` of the answer it chose, and whether that
answer is right. Every replay of one (problem, configuration) weighs ``1 / replays``, so each
configuration counts once per problem. Each row also carries the prompt's prior
(:mod:`evaluation.confidence.prior`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from evaluation.confidence.fit import Row
from evaluation.confidence.prior import Priors
from evaluation.pools.store import ProblemPool, task_type_of
from evaluation.pricing.pricer import DEFAULT_LIMIT, Config, LatencyModel, Pricer, confidence_family
from evaluation.pricing.table import default_configs, judges_in
from services.common.confidence import ConfidenceSignals, prior_kind

REPLAYED = ("cot_greedy", "code_greedy", "sc", "code_vote", "pot", "bon", "wvote")


@dataclass(frozen=True)
class Replay:
    """One replayed run of a configuration on a problem: its signals, whether it was right."""

    problem: str
    config: str
    signals: ConfidenceSignals
    correct: bool


def confidence_configs(pools: Sequence[ProblemPool]) -> list[Config]:
    """The pricing's configurations that end in one answer with a vote to read (no oracle
    ``code_pass``; no early stopping yet: that needs the stopping rule's replay)."""
    k = max((len(d.sampled) for p in pools for d in p.draws.values()), default=0)
    return [c for c in default_configs(k, judges_in(pools)) if c.family in REPLAYED and not c.early_stop]


def replays(pool: ProblemPool, config: Config, *, seed: int = 0, limit: int = DEFAULT_LIMIT,
            prior: Mapping[str, float] | None = None) -> list[Replay]:  # fmt: skip
    """Every replay of ``config`` on ``pool`` (none when it does not apply): the pricing's own
    runs (:meth:`evaluation.pricing.pricer.Pricer.outcomes`, same subsets, same seeded order), so the
    signals fitted on are the ones the priced cascade escalates on and the mean of ``correct`` is
    the pricing's accuracy estimate. The signals carry the prompt's task type and, from
    ``prior`` (kind -> value: :mod:`evaluation.confidence.prior`), its prior, as a served
    answer's do (``services/search/strategies/signals.py:answer_confidence``)."""
    if not config.applies(pool) or config.early_stop:
        return []
    rng = random.Random(f"{seed}:{pool.id}:{config.name}")
    runs = Pricer(LatencyModel(), limit=limit, seed=seed).outcomes(pool, config, rng)
    task = task_type_of(pool)
    kind_prior = (prior or {}).get(prior_kind(confidence_family(config)))
    return [
        Replay(pool.id, config.name, replace(o.signals, task_type=task, prior=kind_prior), o.correct)
        for o in runs
        if o.signals is not None
    ]


@dataclass(frozen=True)
class Weighted:
    """Replays of one (problem, configuration) with identical signals and verdict, merged."""

    problem: str
    config: str
    signals: ConfidenceSignals
    correct: bool
    weight: float


def rows_of(pools: Sequence[ProblemPool], configs: Sequence[Config], *, seed: int = 0,
            priors: Priors | None = None) -> list[Weighted]:  # fmt: skip
    """Every configuration's replays on every pool, each (problem, configuration) weighing 1;
    with ``priors``, each problem's prompt priors in the signals."""
    out: list[Weighted] = []
    for pool in pools:
        for config in configs:
            runs = replays(pool, config, seed=seed, prior=(priors or {}).get(pool.id))
            merged: dict[tuple[ConfidenceSignals, bool], float] = {}
            for r in runs:
                merged[(r.signals, r.correct)] = merged.get((r.signals, r.correct), 0.0) + 1.0 / len(runs)
            out += [Weighted(pool.id, config.name, s, c, w) for (s, c), w in merged.items()]
    return out


def as_rows(rows: Sequence[Weighted]) -> list[Row]:
    """Rows for :func:`services.common.confidence.fit`, identical ones merged (a fit over a few
    thousand rows instead of tens of thousands: the pure-Python Newton steps stay fast)."""
    merged: dict[tuple[ConfidenceSignals, bool], float] = {}
    for r in rows:
        merged[(r.signals, r.correct)] = merged.get((r.signals, r.correct), 0.0) + r.weight
    return [(s, c, w) for (s, c), w in merged.items()]
