"""``python -m loadtests.pools escalation``: the small model, the large one and the cascade, priced.

Reads both models' pools of one split (``docs/data/calibration/pools/<model>/``), prices each
``--pair`` (the small model's configuration, then the large model's) on the problems drawn for
both, and prints per family, per task kind and overall the three arms with 95% intervals,
tokens, p50 latency and the share escalated, then issue 20's verdict for the first pair
(:mod:`evaluation.escalation`). The raw report, with the pools' provenance, goes to
``docs/data/escalation/escalation-<UTC>.json``. Pricing only: no model runs.

    python -m loadtests.pools escalation --large-model qwen2.5-coder-1.5b --split heldout
"""

from __future__ import annotations

import argparse
import sys

from evaluation.escalation import escalation_report, markdown
from evaluation.pools import Chunk, ProblemPool, iter_chunks, latest_pools
from evaluation.pricing import Pricer
from evaluation.pricing_table import default_configs, fit_latency
from evaluation.provenance import write_raw
from evaluation.route_fit import pools_provenance
from loadtests.pools.calibrate import relative_to_root, stop_rule
from loadtests.pools.run import DEFAULT_POOLS

DEFAULT_PAIRS = ("pot@4:es->pot@1", "pot@4:es->pot@4:es", "pot@1->pot@1")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="qwen2.5-coder-0.5b", help="the small model (its pools' folder)")
    p.add_argument("--large-model", default="qwen2.5-coder-1.5b", help="the model escalated to")
    p.add_argument("--split", choices=["calibration", "heldout"], default="heldout")
    p.add_argument("--pair", action="append", default=[],
                   help="small->large configurations (repeatable; the first is the one judged; "
                        f"default {', '.join(DEFAULT_PAIRS)})")  # fmt: skip
    p.add_argument("--threshold", type=float, default=0.75, help="escalate below this vote share of the small model")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--no-write", action="store_true", help="print only; write no raw file")


def _read(model: str, split: str) -> tuple[list[Chunk], list[ProblemPool]]:
    chunks = list(iter_chunks(DEFAULT_POOLS / model, split))
    return chunks, [pool for pool, _ in latest_pools(iter(chunks)).values()]


def run(a: argparse.Namespace) -> int:
    read = {m: _read(m, a.split) for m in (a.model, a.large_model)}
    small_pools, large_pools = read[a.model][1], read[a.large_model][1]
    if not small_pools or not large_pools:
        print(f"no {a.split} pools for {a.model if not small_pools else a.large_model}", file=sys.stderr)
        return 1
    configs = {c.name: c for c in default_configs(8)}
    pairs = []
    for spec in a.pair or DEFAULT_PAIRS:
        small_name, sep, large_name = spec.partition("->")
        if not sep or small_name not in configs or large_name not in configs:
            print(f"bad --pair {spec!r}: want small->large, each one of {', '.join(configs)}", file=sys.stderr)
            return 2
        pairs.append((configs[small_name], configs[large_name]))
    stop = stop_rule(a.confidence)
    small = Pricer(fit_latency(small_pools), stop, limit=a.limit, seed=a.seed)
    large = Pricer(fit_latency(large_pools), stop, limit=a.limit, seed=a.seed)
    reports = [escalation_report(small_pools, large_pools, small, large, s, la, a.threshold, a.seed) for s, la in pairs]
    for r in reports:
        print(markdown(r), end="\n\n")
    if not a.no_write:
        results = {
            "split": a.split,
            "pools": {
                m: pools_provenance(relative_to_root(DEFAULT_POOLS / m), chunks, pools)
                for m, (chunks, pools) in read.items()
            },
            "reports": reports,
        }
        path = write_raw("escalation", results, model=f"{a.model}->{a.large_model}")
        print(f"raw: {path}")
    return 0
