"""The calibration problems as a learned router sees them: priced, embedded, grouped.

Shared by the learned routers (:mod:`~.learned_router`) and their development-split measurement
(:mod:`evaluation.heldout.learned_heldout`): each problem's priced configurations (as the route
fit prices them), its zero-token features (the gateway's ``difficulty_features``), its gateway
task type and family, and whether it is answered in text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation.pools.store import read_pools, task_type_of
from evaluation.pricing.pricer import Pricer, stop_rule
from evaluation.pricing.table import default_configs, fit_latency, judges_in, price_all
from evaluation.problems.datasets import split_key
from evaluation.routing.embeddings import feature_rows
from evaluation.routing.route_fit import problem_stats
from evaluation.routing.types import ProblemStats


@dataclass(frozen=True)
class RouterProblem:
    """One calibration problem as the router sees it: its zero-token features, its gateway
    task type, its family, whether it is answered in text, and its priced configurations."""

    stats: ProblemStats
    features: np.ndarray
    task: str
    family: str
    text: bool
    kind: str = ""  # the pool's task kind (development figures are grouped by it)


def load_problems(
    directory: Path, seed: int = 0, splits: Sequence[str] = ("calibration",)
) -> tuple[dict[str, list[RouterProblem]], dict[str, Any]]:
    """Read, price (as ``make calibrate`` does: calibration's configurations, each split with
    the latency model of its own calls) and embed the pools of each split in ``directory``
    (``splits``: the names a user reads, ``calibration`` and ``development``)."""
    pools = {split: read_pools(directory, split_key(split)) for split in splits}
    if not all(pools.values()):
        raise SystemExit(f"error: a split of {list(splits)} has no pools in {directory}")
    k = min(len(d.sampled) for p in pools[splits[0]] for d in p.draws.values())

    configs = default_configs(k, judges_in(pools[splits[0]]))
    every = [p for split in splits for p in pools[split]]
    t0 = time.monotonic()
    features = dict(zip([p.id for p in every], feature_rows([str(p.problem["question"]) for p in every]), strict=True))
    embed_s = time.monotonic() - t0
    out: dict[str, list[RouterProblem]] = {}
    for split, members in pools.items():
        pricer = Pricer(fit_latency(members), stop_rule(0.9), seed=seed)
        stats = problem_stats(members, price_all(pricer, members, configs), configs)
        out[split] = [
            RouterProblem(st, features[p.id], task_type_of(p), p.family, "code" not in p.draws, p.kind)
            for p, st in zip(members, stats, strict=True)
        ]
    counts = {split: len(members) for split, members in pools.items()}
    return out, {"pools": str(directory), "problems": counts, "k": k, "configs": len(configs),
                 "embedding_seconds": round(embed_s, 2)}  # fmt: skip
