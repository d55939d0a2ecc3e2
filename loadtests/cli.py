"""``python -m loadtests {run,report,compare,full}``: the load test under concurrency.

``run`` drives the gateway over a grid (efforts x pinned strategies or free routing) at a
concurrency or an arrival rate and writes a run directory; ``report`` turns run directories into
tables, Pareto PNGs and a self-contained HTML page; ``compare`` prints the change between two
runs; ``full`` is the development run and its report in one go (what ``make loadtest`` calls),
starting the local stack when no gateway answers. Routing tables are fitted by
``python -m calibration calibrate``, not here.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from evaluation.problems.datasets import UnknownDataset
from evaluation.report.records import read_records
from evaluation.report.tables import Pricing, build_rows, compare
from loadtests.arguments import code_runner, pricing_arguments, run_arguments, run_config
from loadtests.full import add_full_parser
from loadtests.grid import GridError
from loadtests.report_page import make_report
from loadtests.runner import PreflightError, run


def cmd_run(a: argparse.Namespace) -> int:
    config, cells, problems = run_config(a, a.out)
    asyncio.run(run(config, cells, problems, code_runner(a, problems)))
    print(f"records in {a.out}/records.jsonl; report with: python -m loadtests report {a.out}")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    out = a.out or a.runs[0] / "report"
    page = make_report(a.runs, out, a)
    print(f"report: {page}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    pricing = Pricing()
    base = build_rows(read_records([a.base]), pricing)
    new = build_rows(read_records([a.new]), pricing)
    diffs = compare(base, new)
    if not diffs:
        print("no (effort, strategy, level) rows in common")
        return 1
    print(f"{'effort':8} {'strategy':28} {'lvl':4} {'selected (old→new)':>22} {'tokens (old→new)':>20} {'p95 s':>16}")
    for d in diffs:
        s, t, l95 = d["selected"], d["mean_tokens"], d["latency_p95"]

        def f(v: Any, pct: bool = False) -> str:
            return "-" if v is None else (f"{100 * v:.1f}%" if pct else f"{v:.1f}")

        print(
            f"{d['effort']!s:8} {d['strategy']!s:28} {d['level']!s:4} {f(s[0], True):>10}→{f(s[1], True):<10} "  # type: ignore[index]
            f"{f(t[0]):>9}→{f(t[1]):<9} {f(l95[0]):>7}→{f(l95[1]):<7}"  # type: ignore[index]
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtests", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="drive the gateway over a grid and record every request")
    run_arguments(p)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report", help="tables, Pareto PNGs and an HTML page from run directories")
    p.add_argument("runs", type=Path, nargs="+")
    p.add_argument("--out", type=Path, default=None)
    pricing_arguments(p)
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("compare", help="change per (effort, strategy, level) between two runs")
    p.add_argument("base", type=Path)
    p.add_argument("new", type=Path)
    p.set_defaults(func=cmd_compare)
    add_full_parser(sub)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (PreflightError, GridError, UnknownDataset, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as err:
        print(f"\n{err or 'interrupted'}", file=sys.stderr)
        return 130
