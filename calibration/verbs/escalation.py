"""``escalation``: the small model, the large one and the cascade, priced.

Reads both models' pools (``docs/data/calibration/pools/<model>/``) and prices every cascade,
each ``--pair`` (the small model's configuration, then the large model's; each maps onto the
served ``cascade``: ``n``, ``early_stop``, ``large_inner``, ``large_n``, ``large_params``; each
report carries the route that serves it) at each ``--thresholds`` value, on
the problems drawn for both. The cascade judged is chosen on the calibration split
(:func:`evaluation.heldout.escalation.choose`) when both models have calibration pools; otherwise it is
the first pair at the first threshold, stated before any development number was seen, and the
output says it was not chosen on calibration. Printed: every candidate's overall row, then, for
the judged one, per family, per task kind and overall the three arms with 95% intervals,
tokens, p50 latency and the share escalated, and the verdict
(:mod:`evaluation.heldout.escalation`). The raw report, with the pools' provenance, goes to
``docs/data/escalation/escalation-<UTC>.json``. Pricing only: no model runs.

    python -m calibration escalation --large-model qwen2.5-coder-1.5b --split development
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS, relative_to_root
from evaluation.heldout.escalation import CascadeSpec, choose, escalation_report, markdown
from evaluation.pools.provenance import write_raw
from evaluation.pools.store import Chunk, ProblemPool, iter_chunks, latest_pools
from evaluation.pricing.cascade import served_route
from evaluation.pricing.pricer import Config, Pricer, stop_rule
from evaluation.pricing.table import default_configs, fit_latency
from evaluation.problems.datasets import split_key
from evaluation.routing.escalation_join import DEFAULT_PAIRS, THRESHOLDS, pairs_of
from evaluation.routing.fit_provenance import pools_provenance
from evaluation.routing.served_routes import route_of

NAME = "escalation"
HELP = "small model, large model and the cascade, priced from both models' pools"
DEFAULT_THRESHOLDS = ",".join(f"{t:g}" for t in THRESHOLDS)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help="the small model (its pools' folder)")
    p.add_argument("--large-model", default="qwen2.5-coder-1.5b", help="the model escalated to")
    p.add_argument("--split", choices=["calibration", "development"], default="development", help="the split reported")
    p.add_argument("--pair", action="append", default=[],
                   help="small->large configurations (repeatable; the first is the one judged; "
                        f"default {', '.join(DEFAULT_PAIRS)})")  # fmt: skip
    p.add_argument("--thresholds", default=DEFAULT_THRESHOLDS,
                   help="escalate below this calibrated confidence of the small vote (comma-separated)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--no-write", action="store_true", help="print only; write no raw file")


def _read(model: str, split: str) -> tuple[list[Chunk], list[ProblemPool]]:
    """``model``'s chunks and newest pools of the split a user names (``development``, ``calibration``)."""
    chunks = list(iter_chunks(DEFAULT_POOLS / model, split_key(split)))
    return chunks, [pool for pool, _ in latest_pools(iter(chunks)).values()]


def run(a: argparse.Namespace) -> int:
    read = {m: _read(m, a.split) for m in (a.model, a.large_model)}
    small_pools, large_pools = read[a.model][1], read[a.large_model][1]
    if not small_pools or not large_pools:
        print(f"no {a.split} pools for {a.model if not small_pools else a.large_model}", file=sys.stderr)
        return 1
    try:
        thresholds = [float(t) for t in a.thresholds.split(",") if t.strip()]
    except ValueError:
        print(f"bad --thresholds {a.thresholds!r}: want numbers in [0, 1]", file=sys.stderr)
        return 2
    if not thresholds or not all(0.0 <= t <= 1.0 for t in thresholds):
        print(f"bad --thresholds {a.thresholds!r}: want numbers in [0, 1]", file=sys.stderr)
        return 2
    try:
        # pair by pair, each at every threshold: the first pair at the first threshold is judged by default
        candidates = [(c.small, c.large, c.threshold) for c in pairs_of(a.pair or DEFAULT_PAIRS, default_configs(8),
                                                                          thresholds)]  # fmt: skip
    except ValueError as err:
        print(f"bad --pair: {err}", file=sys.stderr)
        return 2
    stop = stop_rule(a.confidence)

    def reports_on(split: str) -> list[dict[str, Any]] | None:
        small_pools, large_pools = read[a.model][1], read[a.large_model][1]
        if split != a.split:
            small_pools, large_pools = _read(a.model, split)[1], _read(a.large_model, split)[1]
        if not {p.id for p in small_pools} & {p.id for p in large_pools}:
            return None
        small = Pricer(fit_latency(small_pools), stop, limit=a.limit, seed=a.seed)
        large = Pricer(fit_latency(large_pools), stop, limit=a.limit, seed=a.seed)
        reports = []
        routes: dict[tuple[Config, Config], tuple[dict[str, Any], dict[str, Any]]] = {}
        for s, la, t in candidates:
            report = escalation_report(small_pools, large_pools, CascadeSpec(small, large, s, la, t), a.seed)
            try:
                if (s, la) not in routes:
                    routes[(s, la)] = (route_of(s, small_pools), route_of(la, large_pools))
                report["served"] = served_route(*routes[(s, la)], t)
            except ValueError as exc:
                report["served"] = None
                report["not_served"] = str(exc)
            reports.append(report)
        return reports

    reports = reports_on(a.split)
    if reports is None:
        print(f"no {a.split} problem is drawn for both models", file=sys.stderr)
        return 1
    fitted = reports_on("calibration") if a.split == "development" else None
    judged = choose(fitted) if fitted else 0
    how = "chosen on calibration" if fitted else "not chosen on calibration (no calibration pools of both): the first"
    print("| cascade | problems | small | large | cascade | cascade tok (large tok) | p50 s (large) | escalated |")
    print("|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(reports):
        g = r["all"]
        mark = " **judged**" if i == judged else ""
        c, la = g["cascade"], g["large"]
        print(f"| `{c['config']}`{mark} | {g['problems']} | {g['small']['accuracy']:.3f} | {la['accuracy']:.3f} | "
              f"{c['accuracy']:.3f} | {c['generated']:.0f} ({la['generated']:.0f}) | "
              f"{c['latency_p50_s']:.1f} ({la['latency_p50_s']:.1f}) | {c['escalated']:.0%} |")  # fmt: skip
    print(f"\njudged: {how}\n")
    print(markdown(reports[judged]))
    print(f"\nserved as: {json.dumps(reports[judged]['served'])}")
    if not a.no_write:
        results = {
            "split": a.split,
            "pools": {
                m: pools_provenance(relative_to_root(DEFAULT_POOLS / m), chunks, pools)
                for m, (chunks, pools) in read.items()
            },
            "judged": judged,
            "judged_how": how,
            "calibration_reports": fitted,
            "reports": reports,
        }
        path = write_raw("escalation", results, model=f"{a.model}->{a.large_model}")
        print(f"raw: {path}")
    return 0
