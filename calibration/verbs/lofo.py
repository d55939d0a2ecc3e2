"""``lofo``: routing judged by leave one family out, fitted without a family, priced on it.

For each calibration family F, the routing table is fitted exactly as ``calibrate --no-draw``
fits it (:func:`calibration.lib.fit.fit_pools`: every calibration pool, the live tree strategies,
the embedding estimator and its bins, the budgets) but on every family except F; F's problems are
then routed as the gateway routes their prompts under that table (its task-type classifier, the
refitted estimator's bins) and the routes priced on F's own pools
(:func:`calibration.lib.heldout_pricing.priced_rows`): on F's development pools, and
on F's calibration pools, which this fit did not see either. A prompt whose task type no
other family supplies gets the table's default routes, as the gateway serves a task type the
table has no routes for; each row says which (``routes``). Beside them stand the same
development problems routed by the full fit (every family, this run) and, from the committed
development report, the figures the served table scored on them (``--in-family``), with the
paired difference. Pricing only, no model runs: one fit per family, about a minute each on two
shared cores. Raw JSON to ``--out``; per effort a Markdown table to stdout
(:mod:`evaluation.heldout.lofo` summarizes).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from calibration.lib.fit import fit_pools
from calibration.lib.gateway_routes import LADDER_EFFORTS
from calibration.lib.heldout_pricing import priced_rows
from calibration.lib.paths import DATA, DEFAULT_MODEL, DEFAULT_POOLS, relative_to_root
from evaluation.heldout.lofo import Row, by_effort, paired_difference
from evaluation.pools.provenance import load_average, provenance
from evaluation.pools.store import ProblemPool, read_pools
from evaluation.problems.datasets import split_key
from evaluation.problems.problemset import FAMILIES, FAMILY_BY_NAME
from services.gateway.routing import RoutingTable

NAME = "lofo"
HELP = "leave one family out: fit routing without a family, price its routes on that family"
SPLITS = ("development", "calibration")  # the left-out family's pools priced
#: the ``development`` verb's reports, newest first by their UTC stamp; the second pattern is the
#: name it wrote before the split was called development (committed reports keep it)
REPORTS = ("development_ladder-[0-9]*.json", "heldout_ladder-[0-9]*.json")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=DEFAULT_MODEL, help="the pools' model (folder under the pools root)")
    p.add_argument("--pools", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--out", type=Path, default=DATA / "lofo", help="folder of the raw JSON, lofo-<UTC>.json")
    p.add_argument("--families", default="", help="comma-separated families to leave out (default: every one)")
    p.add_argument("--in-family", type=Path, default=None,
                   help="the development report to compare with (default: the newest development_ladder-*.json of "
                        "--model under docs/data/calibration)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=64, help="subsets replayed per problem and configuration")
    p.add_argument("--confidence", type=float, default=0.9, help="early-stopping confidence of the priced votes")
    p.add_argument("--estimator", choices=["embedding", "none"], default="embedding")


def newest_report(model: str) -> Path | None:
    """The newest committed development report of ``model``'s own table (no escalation)."""
    found = [path for pattern in REPORTS for path in DATA.glob(pattern)]
    for path in sorted(found, key=lambda p: p.name.split("-", 1)[1], reverse=True):
        prov = json.loads(path.read_text())["provenance"]
        if prov.get("model") == model and "escalation" not in prov.get("fit", {}):
            return path
    return None


def fold(a: argparse.Namespace, pools_dir: Path, left_out: str | None, pools: Mapping[str, Sequence[ProblemPool]],
         efforts: Sequence[str]) -> dict[str, Any]:  # fmt: skip
    """One fit without ``left_out`` (``None``: every family) and its routes priced on ``pools``
    (split -> pools)."""
    fitted = fit_pools(pools_dir, a.model, estimator=a.estimator, confidence=a.confidence, limit=a.limit,
                       seed=a.seed, leave_out={left_out} if left_out else ())  # fmt: skip
    table = RoutingTable.model_validate(fitted.fit.table)
    prov = fitted.fit.table["provenance"]
    rows = {split: priced_rows(table, fitted, ps, efforts, confidence=a.confidence, limit=a.limit, seed=a.seed)
            for split, ps in pools.items()}  # fmt: skip
    return {
        "left_out": left_out,
        "fit": {"problems": prov["problems"], "families": prov["families"], "task_types": prov["task_types"],
                "own_routes": sorted(table.task_routes), "fitted_at": prov["fitted_at"],
                "estimator": table.estimator.kind, "bins": [b.model_dump() for b in table.difficulty_bins]},
        "rows": rows,
    }  # fmt: skip


def summaries(rows: Sequence[Row], in_family: Sequence[Row], committed: Sequence[Row], efforts: Sequence[str],
              seed: int) -> dict[str, Any]:  # fmt: skip
    """Per effort: left-out, full-fit and committed summaries on the same problems, and the paired
    differences of left-out against each."""
    ids = {r["id"] for r in rows}
    mine = [r for r in in_family if r["id"] in ids]
    theirs = [r for r in committed if r["id"] in ids]
    return {
        "left_out": {e: s.as_dict() for e, s in by_effort(rows, efforts, seed).items()},
        "in_family": {e: s.as_dict() for e, s in by_effort(mine, efforts, seed).items()},
        "committed": {e: s.as_dict() for e, s in by_effort(theirs, efforts, seed).items()},
        "vs_in_family": {e: paired_difference(rows, mine, e, seed).as_dict() for e in efforts},
        "vs_committed": {e: paired_difference(rows, theirs, e, seed).as_dict() for e in efforts},
    }


def run(a: argparse.Namespace) -> int:
    pools_dir = a.pools or DEFAULT_POOLS / a.model
    started = provenance(a.model)
    split_pools = {split: read_pools(pools_dir, split_key(split)) for split in SPLITS}
    present = {p.family for p in split_pools["calibration"]}
    families = [f for f in a.families.split(",") if f] or [f.name for f in FAMILIES if f.name in present]
    unknown = sorted(set(families) - present)
    if unknown:
        print(f"error: no calibration pools of {', '.join(unknown)} in {pools_dir}")
        return 1
    report = a.in_family or newest_report(a.model)
    committed = json.loads(report.read_text())["per_problem"] if report else []
    efforts = list(LADDER_EFFORTS)
    full = fold(a, pools_dir, None, {"development": split_pools["development"]}, efforts)
    in_family = full["rows"]["development"]
    folds, per_family = [], {}
    for family in families:
        t0 = time.monotonic()
        kind = FAMILY_BY_NAME[family].kind
        mine = {split: [p for p in ps if p.family == family] for split, ps in split_pools.items()}
        f = fold(a, pools_dir, family, mine, efforts)
        f["kind"] = kind
        f["kind_elsewhere"] = sorted(x for x in present if x != family and FAMILY_BY_NAME[x].kind == kind)
        f["seconds"] = round(time.monotonic() - t0, 1)
        folds.append(f)
        per_family[family] = {split: summaries(f["rows"][split], in_family, committed, efforts, a.seed)
                              for split in SPLITS}  # fmt: skip
        print(fold_line(f), flush=True)
    pooled = {split: summaries([r for f in folds for r in f["rows"][split]], in_family, committed, efforts, a.seed)
              for split in SPLITS}  # fmt: skip
    for effort in efforts:
        print(effort_table(effort, per_family, pooled["development"]))
    settings = {"pools": relative_to_root(pools_dir), "in_family_report": relative_to_root(report) if report else None,
                "limit": a.limit, "confidence": a.confidence, "seed": a.seed, "estimator": a.estimator,
                "efforts": efforts}  # fmt: skip
    body = {
        "provenance": started | settings | {"load_average_end": load_average()},
        "splits": {split: f"{split_key(split)}-*.jsonl" for split in SPLITS},
        "pooled": pooled,
        "per_family": per_family,
        "folds": [{k: v for k, v in f.items() if k != "rows"} for f in folds],
        "in_family_fit": full["fit"],
        "rows": {f["left_out"]: f["rows"] for f in folds},
        "in_family_rows": in_family,
    }
    out = a.out / f"lofo-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=1, default=str) + "\n")
    print(f"\nwrote {relative_to_root(out)}")
    return 0


def fold_line(f: Mapping[str, Any]) -> str:
    """A fold's progress line: what was fitted and how its family's prompts were routed."""
    routed = {split: sum(r["routes"] == "default" for r in rows) for split, rows in f["rows"].items()}
    alone = "alone in its kind" if not f["kind_elsewhere"] else f"kind shared with {', '.join(f['kind_elsewhere'])}"
    return (f"{f['left_out']} ({f['kind']}, {alone}): fitted on {f['fit']['problems']} problems, own routes for "
            f"{', '.join(f['fit']['own_routes'])}; default routes for {routed} problems; {f['seconds']} s")  # fmt: skip


def cell(s: Mapping[str, Any]) -> str:
    """Accuracy % [95% CI] (priced of all)."""
    if s["accuracy"] is None:
        return f"unpriced ({s['problems']})"
    low, high = s["interval"]
    unpriced = f", {s['unpriced']} unpriced" if s["unpriced"] else ""
    return f"{100 * s['accuracy']:.1f} [{100 * low:.1f}, {100 * high:.1f}]{unpriced}"


def points(interval: Sequence[float]) -> str:
    return f"[{100 * interval[0]:+.1f}, {100 * interval[1]:+.1f}]"


def spread(s: Mapping[str, Any]) -> str:
    return "-" if s["mean"] is None else f"{s['mean']:.1f} ± {s['sd']:.1f}"


def effort_table(effort: str, per_family: Mapping[str, Mapping[str, Any]], pooled: Mapping[str, Any]) -> str:
    """``effort``'s Markdown table: per left-out family and pooled, on its development pools."""
    lines = [f"\n### `{effort}`", "",
             "| left out | LOFO accuracy % [95% CI] | in-family (committed) | in-family (this run) | LOFO - committed, "
             "points [paired 95% CI] | LOFO candidates | LOFO generated tok | in-family generated tok |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for family, by_split in [*per_family.items(), ("all", {"development": pooled})]:
        s = by_split["development"]
        d = s["vs_committed"][effort]
        diff = "-" if d["difference"] is None else f"{100 * d['difference']:+.1f} {points(d['interval'])}"
        lines.append(f"| {family} | {cell(s['left_out'][effort])} | {cell(s['committed'][effort])} | "
                     f"{cell(s['in_family'][effort])} | {diff} | {spread(s['left_out'][effort]['candidates'])} | "
                     f"{spread(s['left_out'][effort]['generated_tokens'])} | "
                     f"{spread(s['committed'][effort]['generated_tokens'])} |")  # fmt: skip
    return "\n".join(lines)
