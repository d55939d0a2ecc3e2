"""``learned-router``: learned routers measured against the routing table, not served.

Per configuration, a ridge or kNN over the prompt's zero-token features predicts whether it
answers right, and per effort the router picks the best predicted within the budget
(:mod:`evaluation.routing.learned_router`). By default they are compared with the table's
routing and every fixed configuration by K-fold cross-validation grouped by problem on the
calibration pools; with ``--development`` every router is fitted on every calibration pool and
scored on every pool of the development split (:mod:`evaluation.heldout.learned_heldout`). The raw result goes
to ``docs/data/learned_router/`` (unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.lib.paths import SHIPPED_POOLS
from evaluation.heldout.learned_heldout import evaluate_heldout, markdown, routers
from evaluation.pools.provenance import provenance, write_raw
from evaluation.pools.store import iter_chunks
from evaluation.problems.datasets import split_key
from evaluation.routing.learned_router import cross_validate, knn_predictor, ridge_predictor
from evaluation.routing.router_problems import load_problems
from evaluation.routing.types import BUDGET_MULTIPLES

NAME = "learned-router"
HELP = "learned routers against the table: cross-validated on calibration pools, or on development pools"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pools", type=Path, default=SHIPPED_POOLS)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--knn", type=int, default=5)
    p.add_argument("--alpha", type=float, default=10.0)
    p.add_argument("--shrink", type=float, default=0.5, help="development: kNN_shrunk's weight on the task type's mean")
    p.add_argument("--development", action="store_true",
                   help="train on every calibration pool, test on the development split's")  # fmt: skip
    p.add_argument("--no-write", action="store_true", help="print only; write no raw file")


def run(a: argparse.Namespace) -> int:
    return development(a) if a.development else folds(a)


def folds(a: argparse.Namespace) -> int:
    """Cross-validated on the calibration pools."""
    started = provenance()
    split, about = load_problems(a.pools, a.seed)
    problems = split["calibration"]
    predictors = {"ridge": ridge_predictor(a.alpha), "knn": knn_predictor(a.knn)}
    result = cross_validate(problems, predictors, folds=a.folds, seed=a.seed)
    setup = {"folds": a.folds, "grouping": "problem", "development_pools": False, "ridge_alpha": a.alpha}
    result["setup"] = about | setup | {"knn_k": a.knn, "budget_multiples": dict(BUDGET_MULTIPLES)}
    print(table(result))
    if not a.no_write:
        print(f"wrote {write_raw('learned_router', result, started=started, argv=sys.argv)}")
    return 0


def development(a: argparse.Namespace) -> int:
    """Fitted on the calibration pools, scored on the development split's."""
    splits = ("calibration", "development")
    chunks = {s: [c.path.name for c in iter_chunks(a.pools, split_key(s))] for s in splits}
    started = provenance(chunks=chunks)
    split, about = load_problems(a.pools, a.seed, splits)
    result = evaluate_heldout(split["calibration"], split["development"], routers(a.knn, a.alpha, a.shrink),
                              seed=a.seed)  # fmt: skip
    result["setup"] = about | {"development_pools": True, "ridge_alpha": a.alpha, "knn_k": a.knn, "shrink": a.shrink,
                               "budget_multiples": dict(BUDGET_MULTIPLES)}  # fmt: skip
    print(markdown(result))
    if not a.no_write:
        print(f"wrote {write_raw('learned_router', result, started=started, argv=sys.argv)}")
    return 0


def table(result: Mapping[str, Any]) -> str:
    """Per router and effort: accuracy with its 95% interval and mean cost."""
    lines = ["router  effort   accuracy [95%]        mean cost"]
    for name, per in result["routers"].items():
        for e, s in per.items():
            lo, hi = s["interval"]
            lines.append(f"{name:7} {e:8} {s['accuracy']:.3f} [{lo:.3f}, {hi:.3f}]  {s['mean_cost']:9.1f}")
    return "\n".join(lines)
