"""``table``: every configuration priced offline from the pools, with accuracy and its 95%
bootstrap interval, generated and prompt tokens and the latency estimate, per task kind and
overall; on the calibration split the live tree strategies beside the priced ones on their
subset, and with ``--large-model`` the cascades onto that model's pools and the adaptive votes whose
order escalates to it (on the problems both models drew, beside the same adaptive shapes without
the escalate step on those problems)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from calibration.lib.arguments import add_pool_folder_arguments, pool_folder
from calibration.lib.fit import live_set
from calibration.lib.paths import DEFAULT_LIVE, DEFAULT_POOLS
from evaluation.pools.provenance import provenance
from evaluation.pools.store import read_pools
from evaluation.pricing.cascade import cascade
from evaluation.pricing.live_configs import live_table
from evaluation.pricing.pricer import Estimate, Pricer, StopRule, stop_rule
from evaluation.pricing.table import (
    ESCALATING_ORDERS,
    Row,
    adaptive_configs,
    default_configs,
    fit_latency,
    judges_in,
    price_all,
    summarize,
    table,
)
from evaluation.problems.datasets import SPLIT_NAMES, split_key

NAME = "table"
HELP = "price every configuration offline from the pools; accuracy with 95%% intervals, tokens, latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_pool_folder_arguments(p)
    p.add_argument("--split", choices=list(SPLIT_NAMES), default="calibration")
    p.add_argument("--limit", type=int, default=128, help="subsets replayed per problem before sampling them")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence")
    p.add_argument("--configs", default="", help="only these configurations (comma-separated)")
    p.add_argument("--large-model", default="", help="price the cascade onto this model's pools")
    p.add_argument("--threshold", type=float, default=0.75, help="cascade: escalate below this vote share")
    p.add_argument("--json", type=Path, default=None, help="write rows and per-problem estimates here")
    p.add_argument("--live", type=Path, default=None,
                   help="live records of tree strategies (default docs/data/calibration/live/<model>)")  # fmt: skip


def _print_rows(rows: list[Row], keep: set[str] | None) -> None:
    print(
        "| group | configuration | problems | accuracy | 95% CI | generated tok | prompt tok | latency s (mean / p50) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if keep is not None and r.config not in keep:
            continue
        esc = f" (escalated {r.escalated:.0%})" if r.escalated else ""
        print(f"| {r.group} | `{r.config}`{esc} | {r.problems} | {r.accuracy:.3f} | [{r.low:.3f}, {r.high:.3f}] | "
              f"{r.generated:.0f} | {r.prompt:.0f} | {r.latency_s:.1f} / {r.latency_p50_s:.1f} |")  # fmt: skip


def run(a: argparse.Namespace) -> int:
    split = split_key(a.split)
    pools = [p for p in read_pools(pool_folder(a)) if split in ("all", p.split)]
    if not pools:
        print("no pools drawn yet", file=sys.stderr)
        return 1
    k = min(len(d.sampled) for p in pools for d in p.draws.values())
    pricer = Pricer(fit_latency(pools), stop_rule(a.confidence), limit=a.limit, seed=a.seed)
    configs = default_configs(k, judges_in(pools))
    priced = price_all(pricer, pools, configs)
    rows = table(pools, priced, a.seed)
    live_dir = a.live or DEFAULT_LIVE / a.model
    measured = live_set(live_dir) if a.split == "calibration" and live_dir.is_dir() else None
    if measured is not None:  # sequential and tree strategies, beside the priced ones on their subset
        rows += live_table(pools, priced, measured.estimates, a.seed)
    if a.large_model:
        rows += _cascade_rows(a, pools, pricer, pricer.stop, priced)
    keep = {c for c in a.configs.split(",") if c} or None
    print(f"{len(pools)} problems ({a.split}), k={k}; latency model {pricer.latency}")
    _print_rows(rows, keep)
    if a.json:
        per_problem = {name: {pid: e.__dict__ for pid, e in est.items()} for name, est in priced.items()}
        # The pools' own chunk headers name the code and seeds that drew them; this names the pricer.
        meta = provenance(a.model, split=a.split, problems=len(pools), k=k, pools=str(pool_folder(a)))
        body = {"provenance": meta, "rows": [r.as_dict() for r in rows], "per_problem": per_problem}
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(body, indent=1))
    return 0


def _cascade_rows(a: argparse.Namespace, pools: list[Any], pricer: Pricer, stop: StopRule | None,
                  priced: Mapping[str, Mapping[str, Estimate]]) -> list[Row]:  # fmt: skip
    large = {p.id: p for p in read_pools(DEFAULT_POOLS / a.large_model)}
    both = [p for p in pools if p.id in large]
    if not both:
        return []
    large_pricer = Pricer(fit_latency(list(large.values())), stop, limit=a.limit, seed=a.seed)
    configs = {c.name: c for c in default_configs(8)}
    rows = []
    for small_name, large_name in (("pot@1", "pot@1"), ("pot@4:es", "pot@1"), ("pot@4:es", "pot@4:es")):
        small_c, large_c = configs[small_name], configs[large_name]
        for group in [*dict.fromkeys(p.kind for p in both), "all"]:
            found = [cascade(pricer, large_pricer, p, large[p.id], small_c, large_c, a.threshold)
                     for p in both if group in ("all", p.kind)]  # fmt: skip
            est = [e for e in found if e is not None]
            if est:
                rows.append(summarize(group, f"cascade({small_name}->{a.large_model}:{large_name})", est, a.seed))
    return rows + _adaptive_rows(a, both, large, pricer, large_pricer, priced)


def _adaptive_rows(a: argparse.Namespace, both: list[Any], large: dict[str, Any], pricer: Pricer,
                   large_pricer: Pricer, priced: Mapping[str, Mapping[str, Estimate]]) -> list[Row]:  # fmt: skip
    """Every adaptive configuration on the problems both models drew: the escalating orders priced
    on both pools (labelled ``...:escalate...->large``), the others as already priced on the small
    model's (``priced``)."""
    rows = []
    for config in adaptive_configs() + adaptive_configs(ESCALATING_ORDERS):
        label = f"{config.name}->{a.large_model}" if config.escalates else config.name
        for group in [*dict.fromkeys(p.kind for p in both), "all"]:
            members = [p for p in both if group in ("all", p.kind)]
            found = [pricer.escalating(p, config, large[p.id], large_pricer) if config.escalates
                     else priced.get(config.name, {}).get(p.id) for p in members]  # fmt: skip
            est = [e for e in found if e is not None]
            if est and len(est) == len(members):
                rows.append(summarize(group, label, est, a.seed))
    return rows
