"""Cost against accuracy per task kind, from the committed calibration pools (no model runs).

Prices every configuration offline on every calibration pool (:mod:`evaluation.pricing.pricer`), fits
the routing table from the same pools in memory (:func:`evaluation.routing.route_fit.fit`, as
``make calibrate`` does, with the gateway's embedding estimator), and draws per task kind
(gateway classifier) every fixed configuration, their Pareto frontier and the ladder's points
(what each effort routes the kind's problems to) with 95% bootstrap intervals over problems.
Writes ``docs/img/frontier/<task>.png`` and the raw points to ``docs/data/frontier/``.

    python scripts/frontier_plot.py [--pools DIR] [--out-img DIR]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.pools.provenance import provenance, write_raw  # noqa: E402
from evaluation.pools.store import read_pools  # noqa: E402
from evaluation.pricing.pricer import Pricer  # noqa: E402
from evaluation.pricing.table import default_configs, fit_latency, judges_in, price_all  # noqa: E402
from evaluation.report.frontier import KindFrontier, by_task  # noqa: E402
from evaluation.report.frontier_png import plot  # noqa: E402
from evaluation.routing.embeddings import feature_rows  # noqa: E402
from evaluation.routing.route_fit import FitSettings, fit, problem_stats  # noqa: E402
from evaluation.routing.types import PREFILL_WEIGHT  # noqa: E402
from services.search.strategies.stopping import should_stop  # noqa: E402

DEFAULT_POOLS = ROOT / "docs" / "data" / "calibration" / "pools" / "qwen2.5-coder-0.5b"
DEFAULT_IMG = ROOT / "docs" / "img" / "frontier"
CONFIDENCE = 0.9  # python -m calibration calibrate's default early-stopping confidence
LIMIT = 64  # and its subsets replayed per problem and configuration
SEED = 0


def compute(pools_dir: Path) -> tuple[list[KindFrontier], dict[str, Any]]:
    """The frontiers per task kind and what they were computed from."""
    pools = read_pools(pools_dir, "calibration")
    if not pools:
        raise SystemExit(f"error: no calibration pools in {pools_dir}")
    k = min(len(d.sampled) for p in pools for d in p.draws.values())
    pricer = Pricer(fit_latency(pools), lambda votes, left: should_stop(votes, left, CONFIDENCE).stop,
                    limit=LIMIT, seed=SEED)  # fmt: skip
    configs = default_configs(k, judges_in(pools))
    features = feature_rows([str(p.problem["question"]) for p in pools])
    fitted = fit(pools, pricer, configs, features=features, settings=FitSettings(seed=SEED), source=str(pools_dir))
    stats = problem_stats(pools, price_all(pricer, pools, configs), configs, PREFILL_WEIGHT)
    kinds = by_task(stats, fitted.predictions, prefill_weight=PREFILL_WEIGHT, seed=SEED)
    meta = {
        "pools": _relative(pools_dir), "split": "calibration", "problems": len(pools), "k": k,
        "prefill_weight": PREFILL_WEIGHT, "confidence": CONFIDENCE, "limit": LIMIT, "seed": SEED,
        "table": "fitted in memory by evaluation.routing.route_fit.fit from the same pools (embedding estimator)",
        "difficulty_bins": fitted.table["difficulty_bins"],
    }  # fmt: skip
    return kinds, meta


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def main(argv: list[str] | None = None) -> int:
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--pools", type=Path, default=DEFAULT_POOLS)
    a.add_argument("--out-img", type=Path, default=DEFAULT_IMG)
    args = a.parse_args(argv)
    started = provenance(model=None)
    kinds, meta = compute(args.pools)
    for kind in kinds:
        plot(
            kind,
            args.out_img / f"{kind.task}.png",
            title=f"{kind.task}: {kind.problems} calibration problems (not held out)",
        )
        ladder = ", ".join(
            f"{lp.effort}={lp.point.label} {lp.point.accuracy:.2f}@{lp.point.cost:.0f}"
            + ("" if lp.on_frontier else " (below)")
            for lp in kind.ladder
        )
        print(f"{kind.task} ({kind.problems} problems): frontier {[p.label for p in kind.frontier]}; ladder {ladder}")
    path = write_raw("frontier", {**meta, "kinds": [k.as_dict() for k in kinds]}, started=started,
                     argv=sys.argv if argv is None else argv)  # fmt: skip
    print(f"wrote {_relative(path)} and {len(kinds)} PNGs under {_relative(args.out_img)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
