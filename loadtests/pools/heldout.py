"""``python -m loadtests.pools heldout``: the fitted effort ladder scored on held-out pools.

Fits the routing exactly as ``calibrate`` does (:func:`loadtests.pools.calibrate.fit_pools`,
calibration pools only), routes every held-out problem as the gateway routes its prompt
(:func:`loadtests.ladder.route_questions`: task-type classifier, the table's zero-token
estimator and bins), prices the routed configuration on the problem's own held-out pool (the
latency model fitted on the held-out pools' calls, as ``table`` does) and prints, per task kind
and overall, the ladder beside every fixed configuration and the best fixed one within each
effort's budget, then issue 21's Must-show checks as pass/miss lines
(:mod:`evaluation.heldout_ladder`, :mod:`evaluation.heldout_checks`). Pricing only: no model
runs (the embedding encoder loads, as in ``calibrate``). Raw data: JSON to ``--out``; per task
kind a cost-vs-accuracy frontier PNG (every fixed configuration, the routed ladder, the
efforts' budgets) to ``--img-dir``.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation.calibration import BUDGET_MULTIPLES, PREFILL_WEIGHT
from evaluation.escalation_join import cascade_estimates, pair_of_label
from evaluation.frontier import by_task
from evaluation.frontier_png import plot
from evaluation.heldout_checks import Check, all_checks
from evaluation.heldout_ladder import (
    BestFixed,
    Outcomes,
    Summary,
    fit_budgets,
    label_index,
    ladder,
    per_problem,
    problem_budgets,
    routed_labels,
)
from evaluation.live_join import LiveSet, add_measured
from evaluation.pools import ProblemPool, iter_chunks, read_pools, task_type_of
from evaluation.pricing import Config, Pricer, stop_rule
from evaluation.pricing_table import fit_latency, price_all
from evaluation.provenance import provenance
from evaluation.route_fit import NOT_ROUTABLE, pools_provenance, problem_stats
from loadtests.grid import EFFORTS
from loadtests.ladder import route_questions
from loadtests.pools.calibrate import FittedPools, fit_pools
from loadtests.pools.run import DEFAULT_POOLS
from loadtests.pools.services import ROOT, relative_to_root
from services.gateway.routing import RoutingTable

DEFAULT_OUT_DIR = ROOT / "docs" / "data" / "calibration"
DEFAULT_IMG_DIR = ROOT / "docs" / "img" / "frontier" / "heldout"
PLOTTED_BUDGETS = ("low", "medium", "high")  # the efforts whose budgets the frontier plots mark


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="the pools' model (folder under the pools root)")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--out", type=Path, default=None,
                   help="raw JSON (default docs/data/calibration/heldout_ladder-<UTC>.json)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--estimator", choices=["embedding", "none"], default="embedding")
    p.add_argument("--img-dir", type=Path, default=DEFAULT_IMG_DIR,
                   help="frontier PNG per task kind (default docs/img/frontier/heldout)")  # fmt: skip
    p.add_argument("--large-pools", type=Path, default=None,
                   help="a larger model's pool folder: cascades onto it compete in the fit and are priced on the "
                        "held-out problems drawn for both models (elsewhere a routed cascade is unpriced)")  # fmt: skip


def intended(chunks: Sequence[Any]) -> tuple[int | None, list[str]]:
    """The held-out split's intended size (per family x families, from the chunk headers'
    data provenance) and its families."""
    data = [c.header.get("data") or {} for c in chunks]
    sizes = {int(d.get("per_family", 0)) * len(d.get("families", [])) for d in data if d}
    families = sorted({f for d in data for f in d.get("families", [])})
    return (max(sizes) if sizes else None), families


def _row(r: Summary, extra: str = "") -> str:
    p50 = f"{r.p50_latency_s:.1f}" if r.p50_latency_s is not None else "-"
    unpriced = f" ({r.unpriced} unpriced)" if r.unpriced else ""
    return (f"| {r.name}{extra} | {r.problems}{unpriced} | {100 * r.accuracy:.1f} | "
            f"[{100 * r.interval[0]:.1f}, {100 * r.interval[1]:.1f}] | {r.generated_tokens:.0f} | "
            f"{r.prompt_tokens:.0f} | {r.cost:.0f} | {p50} |")  # fmt: skip


HEADER = ("| effort / configuration | problems | accuracy % | 95% CI | generated tok | prompt tok | cost | p50 s |\n"
          "|---|---|---|---|---|---|---|---|")  # fmt: skip


def markdown(groups: Mapping[str, Mapping[str, Any]], checks: Sequence[Check], head: Sequence[str]) -> str:
    lines = [*head, "", "## Must-show checks", "", *[c.line() for c in checks], ""]
    for name, g in groups.items():
        lines += [f"## {name}: {g['problems']} held-out problems", "", HEADER]
        for r in g["routed"].values():
            routed = ", ".join(f"{c} x{n}" for c, n in r.configs.items())
            lines.append(_row(r, f" (routed: {routed})"))
        lines.append("| *best fixed within budget* | | | | | | | |")
        for effort, b in g["best_fixed"].items():
            fits = "" if b.fits else ", none fits: cheapest"
            lines.append(_row(b.summary, f" @ {effort} (budget {b.budget:.0f}, {b.competing} compete{fits})"))
        lines.append("| *every fixed configuration* | | | | | | | |")
        lines += [_row(f) for f in g["fixed"]]
        lines.append("")
    return "\n".join(lines)


def _json(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    def dump(v: Any) -> Any:
        if isinstance(v, Summary | BestFixed):
            return v.as_dict()
        if isinstance(v, dict):
            return {k: dump(x) for k, x in v.items()}
        if isinstance(v, list):
            return [dump(x) for x in v]
        return v

    return {name: dump(dict(g)) for name, g in groups.items()}


def frontiers(groups: Mapping[str, Mapping[str, Any]], outcomes: Outcomes, rows: Sequence[Mapping[str, Any]],
              img_dir: Path, fitted_on: int, seed: int) -> list[dict[str, Any]]:  # fmt: skip
    """Per task kind, every fixed configuration's held-out point, their Pareto frontier and the
    routed ladder's points, drawn to ``img_dir/<kind>.png`` with the efforts' budgets marked:
    the plot the issue asks for when nothing measured pays past ``low``. Returns the raw points."""
    kinds = by_task(list(outcomes.stats.values()), rows, prefill_weight=PREFILL_WEIGHT, seed=seed, key="kind")
    for kind in kinds:
        best = groups[kind.task]["best_fixed"]
        plot(kind, img_dir / f"{kind.task}.png",
             title=f"{kind.task}: {kind.problems} held-out problems (routing fitted on {fitted_on} calibration)",
             budgets={e: best[e].budget for e in PLOTTED_BUDGETS if e in best})  # fmt: skip
    return [k.as_dict() for k in kinds]


def run(a: argparse.Namespace) -> int:
    pools_dir = a.pools or DEFAULT_POOLS / a.model
    fitted = fit_pools(pools_dir, a.model, estimator=a.estimator, confidence=a.confidence, limit=a.limit,
                       seed=a.seed, large_pools_dir=a.large_pools)  # fmt: skip
    table = RoutingTable.model_validate(fitted.fit.table)
    heldout = read_pools(pools_dir, "heldout")
    chunks = list(iter_chunks(pools_dir, "heldout"))
    size, families = intended(chunks or list(iter_chunks(pools_dir, "calibration")))
    missing = sorted(set(families) - {p.family for p in heldout})
    efforts = [e for e in EFFORTS if e in BUDGET_MULTIPLES]
    if not heldout:
        print(f"error: no held-out pools in {pools_dir} (held-out: 0 of {size} drawn)")
        return 1
    routes = route_questions(table, {p.id: str(p.problem["question"]) for p in heldout}, efforts)
    index = label_index(fitted.configs, fitted.pools, fitted.live.routes if fitted.live else None)
    labels = routed_labels({e: {pid: r.model_dump() for pid, r in per.items()} for e, per in routes.items()}, index)
    sources = {e: {pid: r.expected.source.split("; ", 1)[-1] for pid, r in per.items() if r.expected}
               for e, per in routes.items()}  # fmt: skip
    pricer = Pricer(fit_latency(heldout), stop_rule(a.confidence), limit=a.limit, seed=a.seed)
    outcomes = Outcomes.of(heldout, price_all(pricer, heldout, fitted.configs), fitted.configs)
    if a.large_pools is not None:
        add_cascades(outcomes, heldout, read_pools(a.large_pools, "heldout"), pricer, fitted,
                     confidence=a.confidence, limit=a.limit, seed=a.seed)  # fmt: skip
    greedy = [c for c in fitted.configs if c.family in ("cot_greedy", "code_greedy")]
    calibration = problem_stats(fitted.pools, price_all(fitted.pricer, fitted.pools, greedy), greedy)
    budgets = fit_budgets(calibration, fitted.pools, BUDGET_MULTIPLES)
    task_of = {p.id: task_type_of(p) for p in heldout}
    groups = ladder(heldout, labels, outcomes, problem_budgets(task_of, budgets), efforts, a.seed)
    checks = all_checks(groups, efforts, len(heldout), size, missing)
    fit_prov = fitted.fit.table["provenance"]
    head = [
        f"# Held-out ladder from pools: {a.model}",
        "",
        f"Routing fitted on {fit_prov['problems']} calibration problems ({', '.join(fit_prov['chunks'][:1])}..), "
        f"scored on {len(heldout)} held-out problems of {size or '?'} intended "
        f"({', '.join(f'{k} {n}' for k, n in Counter(p.kind for p in heldout).items())}). "
        f"Held-out latency model {pricer.latency}. Budgets: {dict(BUDGET_MULTIPLES)} x the mean greedy cost "
        f"(generated + {PREFILL_WEIGHT} x prompt tokens) on the calibration problems of each prompt's task type "
        "(the budgets the fit used), averaged over a group's problems.",
    ]
    print(markdown(groups, checks, head))
    rows = per_problem(heldout, labels, outcomes, task_of, sources)
    plotted = frontiers(groups, outcomes, rows, a.img_dir, int(fit_prov["problems"]), a.seed)
    print(f"\nwrote {len(plotted)} frontier PNGs under {relative_to_root(a.img_dir)}")
    out = a.out or DEFAULT_OUT_DIR / f"heldout_ladder-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    meta = provenance(a.model, heldout=pools_provenance(relative_to_root(pools_dir), chunks, heldout), fit=fit_prov,
                      latency_model=pricer.latency.__dict__, limit=a.limit, confidence=a.confidence,
                      seed=a.seed)  # fmt: skip
    drawn = dict(sorted(Counter(p.family for p in heldout).items()))
    body = {
        "provenance": meta,
        "coverage": {"drawn": len(heldout), "intended": size, "missing_families": missing, "families": drawn},
        "budgets": budgets,
        "configurations": [c.name for c in fitted.configs if c.family not in NOT_ROUTABLE],
        "oracle_configurations": _oracles(fitted.configs),
        "checks": [c.as_dict() for c in checks],
        "groups": _json(groups),
        "per_problem": rows,
        "frontier": plotted,
        "table": fitted.fit.table,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=1, default=str) + "\n")
    print(f"\nwrote {out}")
    return 0


def add_cascades(outcomes: Outcomes, heldout: Sequence[ProblemPool], large_heldout: Sequence[ProblemPool],
                 pricer: Pricer, fitted: FittedPools, *, confidence: float, limit: int, seed: int) -> None:  # fmt: skip
    """Every cascade the fit could route to, priced on the held-out problems drawn for both
    models, into ``outcomes`` (in place); nothing when the fit had no cascades or the large
    model no held-out pools."""
    if not large_heldout or fitted.live is None:
        return
    large = Pricer(fit_latency(large_heldout), stop_rule(confidence), limit=limit, seed=seed)
    pairs = [p for label in fitted.live.routes if (p := pair_of_label(label, fitted.configs)) is not None]
    estimates = cascade_estimates(heldout, large_heldout, pricer, large, pairs)
    add_measured(list(outcomes.stats.values()), LiveSet(estimates, {}), outcomes.latency, PREFILL_WEIGHT)


def _oracles(configs: Sequence[Config]) -> list[str]:
    """Configurations no route runs (oracles): listed, not scored as routes."""
    return [c.name for c in configs if c.family in NOT_ROUTABLE]
