"""``development``: the fitted effort ladder scored on the development split's pools, with the
Must-show checks.

The development split is disjoint from the calibration one, but it was looked at while the
ladder, its checkers and its prompts were built, so its figures are development figures, never
held-out ones (those are ``lofo`` and ``sealed``). Fits the routing exactly as ``calibrate``
does (:func:`calibration.lib.fit.fit_pools`, calibration pools only), routes every development
problem as the gateway routes its prompt (task-type classifier, the table's zero-token estimator
and bins), prices the routed configuration on the problem's own development pool (the latency
model fitted on those pools' calls, as ``table`` does: :mod:`calibration.lib.heldout_pricing`)
and prints, per task
kind and overall, the ladder beside every fixed configuration and the best fixed one within each
effort's budget, then the Must-show checks as pass/miss lines (:mod:`evaluation.heldout.ladder`,
:mod:`evaluation.heldout.checks`). Pricing only: no model runs (the embedding encoder loads, as
in ``calibrate``). Raw data: JSON to ``--out``; per task kind a cost-vs-accuracy frontier PNG
(every fixed configuration, the routed ladder, the efforts' budgets) to ``--img-dir``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calibration.lib.fit import fit_pools
from calibration.lib.gateway_routes import LADDER_EFFORTS
from calibration.lib.heldout_pricing import calibration_budgets, priced, routed
from calibration.lib.paths import DATA, DEFAULT_MODEL, DEFAULT_POOLS, ROOT, relative_to_root
from evaluation.heldout.checks import all_checks
from evaluation.heldout.ladder import Outcomes, ladder, per_problem, problem_budgets
from evaluation.heldout.ladder_report import as_json, intended, markdown
from evaluation.pools.provenance import provenance
from evaluation.pools.store import iter_chunks, read_pools, task_type_of
from evaluation.pricing.pricer import Config
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.report.frontier import by_task
from evaluation.report.frontier_png import plot
from evaluation.routing.fit_provenance import pools_provenance
from evaluation.routing.route_fit import NOT_ROUTABLE
from evaluation.routing.types import BUDGET_MULTIPLES, PREFILL_WEIGHT
from services.gateway.routing import RoutingTable

NAME = "development"
HELP = "fit routing on calibration pools, score the ladder on the development split's pools"
DEFAULT_IMG_DIR = ROOT / "docs" / "img" / "frontier" / "development"
PLOTTED_BUDGETS = ("low", "medium", "high")  # the efforts whose budgets the frontier plots mark


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help="the pools' model (folder under the pools root)")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--out", type=Path, default=None,
                   help="raw JSON (default docs/data/calibration/development_ladder-<UTC>.json)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--estimator", choices=["embedding", "none"], default="embedding")
    p.add_argument("--img-dir", type=Path, default=DEFAULT_IMG_DIR,
                   help="frontier PNG per task kind (default docs/img/frontier/development)")  # fmt: skip
    p.add_argument("--large-pools", type=Path, default=None,
                   help="a larger model's pool folder: cascades onto it compete in the fit and are priced on "
                        "the development problems drawn for both models (elsewhere a routed cascade is "
                        "unpriced)")  # fmt: skip


def frontiers(groups: Mapping[str, Mapping[str, Any]], outcomes: Outcomes, rows: Sequence[Mapping[str, Any]],
              img_dir: Path, fitted_on: int, seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """Per task kind, every fixed configuration's development point, their Pareto frontier and the
    routed ladder's points, drawn to ``img_dir/<kind>.png`` with the efforts' budgets marked:
    the plot that shows where nothing measured pays past ``low``. Returns the raw points."""
    kinds = by_task(list(outcomes.stats.values()), rows, prefill_weight=PREFILL_WEIGHT, seed=seed, key="kind")
    for kind in kinds:
        best = groups[kind.task]["best_fixed"]
        plot(kind, img_dir / f"{kind.task}.png",
             title=f"{kind.task}: {kind.problems} development problems (routing fitted on {fitted_on} calibration)",
             budgets={e: best[e].budget for e in PLOTTED_BUDGETS if e in best})  # fmt: skip
    return [k.as_dict() for k in kinds]


def run(a: argparse.Namespace) -> int:
    pools_dir = a.pools or DEFAULT_POOLS / a.model
    fitted = fit_pools(pools_dir, a.model, estimator=a.estimator, confidence=a.confidence, limit=a.limit,
                       seed=a.seed, large_pools_dir=a.large_pools)  # fmt: skip
    table = RoutingTable.model_validate(fitted.fit.table)
    development = read_pools(pools_dir, DEVELOPMENT_KEY)
    chunks = list(iter_chunks(pools_dir, DEVELOPMENT_KEY))
    size, families = intended(chunks or list(iter_chunks(pools_dir, "calibration")))
    missing = sorted(set(families) - {p.family for p in development})
    efforts = list(LADDER_EFFORTS)
    if not development:
        print(f"error: no development pools in {pools_dir} (development: 0 of {size} drawn)")
        return 1
    routes, labels = routed(table, fitted, development, efforts)
    sources = {e: {pid: r.expected.source.split("; ", 1)[-1] for pid, r in per.items() if r.expected}
               for e, per in routes.items()}  # fmt: skip
    large = read_pools(a.large_pools, DEVELOPMENT_KEY) if a.large_pools is not None else []
    pricer, outcomes = priced(development, fitted, confidence=a.confidence, limit=a.limit, seed=a.seed,
                              large_pools=large)  # fmt: skip
    budgets = calibration_budgets(fitted)
    task_of = {p.id: task_type_of(p) for p in development}
    groups = ladder(development, labels, outcomes, problem_budgets(task_of, budgets), efforts, a.seed)
    checks = all_checks(groups, efforts, len(development), size, missing)
    fit_prov = fitted.fit.table["provenance"]
    head = [
        f"# Development-split ladder from pools: {a.model}",
        "",
        f"Routing fitted on {fit_prov['problems']} calibration problems ({', '.join(fit_prov['chunks'][:1])}..), "
        f"scored on {len(development)} development problems of {size or '?'} intended "
        f"({', '.join(f'{k} {n}' for k, n in Counter(p.kind for p in development).items())}); the development "
        "split was looked at while the ladder was built, so these are not held-out figures. "
        f"Development latency model {pricer.latency}. Budgets: {dict(BUDGET_MULTIPLES)} x the mean greedy cost "
        f"(generated + {PREFILL_WEIGHT} x prompt tokens) on the calibration problems of each prompt's task type "
        "(the budgets the fit used), averaged over a group's problems.",
    ]
    print(markdown(groups, checks, head))
    rows = per_problem(development, labels, outcomes, task_of, sources)
    plotted = frontiers(groups, outcomes, rows, a.img_dir, int(fit_prov["problems"]), a.seed)
    print(f"\nwrote {len(plotted)} frontier PNGs under {relative_to_root(a.img_dir)}")
    out = a.out or DATA / f"development_ladder-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    meta = provenance(a.model, development=pools_provenance(relative_to_root(pools_dir), chunks, development),
                      fit=fit_prov, latency_model=pricer.latency.__dict__, limit=a.limit, confidence=a.confidence,
                      seed=a.seed)  # fmt: skip
    drawn = dict(sorted(Counter(p.family for p in development).items()))
    body = {
        "provenance": meta,
        "coverage": {"drawn": len(development), "intended": size, "missing_families": missing, "families": drawn},
        "budgets": budgets,
        "configurations": [c.name for c in fitted.configs if c.family not in NOT_ROUTABLE],
        "oracle_configurations": oracles(fitted.configs),
        "checks": [c.as_dict() for c in checks],
        "groups": as_json(groups),
        "per_problem": rows,
        "frontier": plotted,
        "table": fitted.fit.table,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=1, default=str) + "\n")
    print(f"\nwrote {out}")
    return 0


def oracles(configs: Sequence[Config]) -> list[str]:
    """Configurations no route runs (oracles): listed, not scored as routes."""
    return [c.name for c in configs if c.family in NOT_ROUTABLE]
