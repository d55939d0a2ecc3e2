"""``python -m loadtests full``: the cost-versus-accuracy study under load in one command (what
``make loadtest`` runs).

1. a development run: pinned configurations (the comparison) and free routing at every effort,
   on the development split's problems only (looked at while the ladder was built: development
   figures, not held-out ones), routed by the gateway's own table for the model (the shipped
   ``routing.<model>.json`` where the model has one, fitted on its calibration pools by
   ``python -m calibration calibrate``; the default table otherwise);
2. the report: ``<out>/report/report.html`` with its tables and Pareto charts.

When no gateway answers at ``--base-url``, the local stack (``ttc stack``) is started with
``TTC_POLICY_MODEL=--model`` and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import signal
from pathlib import Path
from typing import Any

from evaluation.problems.datasets import DEVELOPMENT_KEY
from loadtests.arguments import pricing_arguments, run_arguments, run_config
from loadtests.gateway_stack import Stack, healthy
from loadtests.grid import EFFORTS, build_grid, split_list
from loadtests.report_page import make_report
from loadtests.runner import run

# The pinned configurations the routed efforts are compared with: greedy chain of thought (the
# `none` rung), self-consistency, program-of-thought alone and voting, and the hybrid.
DEFAULT_CONFIGS = (
    "single:greedy=true,self_consistency:n=3,self_consistency:n=6,program_of_thought:n=1,"
    "program_of_thought:n=4,program_of_thought:n=6:mode=hybrid"
)


def _raise_on_sigterm() -> None:
    """SIGTERM as Ctrl-C, so ``finally`` stops the stack this command started. Re-armed after
    the run because the runner's event loop restores the default handler when it ends."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("terminated")

    signal.signal(signal.SIGTERM, handler)


def cmd_full(a: argparse.Namespace) -> int:
    datasets = split_list(a.datasets)
    levels = [int(x) for x in split_list(a.levels)]
    a.problems = max(1, math.ceil(a.problems / max(1, len(datasets) * len(levels))))
    efforts = split_list(a.efforts) if a.efforts else list(EFFORTS)
    out: Path = a.out
    stack: Stack | None = None
    _raise_on_sigterm()
    if not healthy(a.base_url) and not a.no_start_stack:
        print(f"no gateway at {a.base_url}: starting the local stack with {a.model} (log {out / 'stack.log'})")
        stack = Stack(a.model, a.base_url, out / "stack.log")
        stack.start()
    try:
        auto_cells = build_grid(efforts, ["auto"])  # validated before any load is sent
        a.efforts, a.strategies = a.pinned_effort, a.configs
        config, fixed_cells, problems = run_config(a, out / "development-run", split=DEVELOPMENT_KEY)
        asyncio.run(run(config, [*fixed_cells, *auto_cells], problems))
        _raise_on_sigterm()
        title = f"ttc-serve cost vs accuracy under load, development problems: {a.model}"
        page = make_report([out / "development-run"], out / "report", a, title=title)
        print(f"report: {page}")
        return 0
    finally:
        if stack is not None:
            stack.stop()


def add_full_parser(sub: Any) -> None:
    p = sub.add_parser(
        "full", help="development run (pinned configurations and routed efforts) and report (make loadtest)"
    )
    run_arguments(p)
    p.set_defaults(func=cmd_full, problems=108, efforts="", out=Path("reports/loadtest"), max_tokens=192)
    for action in p._actions:  # --problems means the total here; --out has a default
        if action.dest == "problems":
            action.help = "development problems in total, spread over sets x levels"
        if action.dest == "out":
            action.required = False
        if action.dest == "efforts":
            action.help = "efforts routed freely in the development run (default: every effort)"
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="pinned configurations measured beside the efforts")
    p.add_argument("--pinned-effort", default="medium", help="effort label of the pinned requests")
    p.add_argument("--no-start-stack", action="store_true", help="fail instead of starting the local stack")
    pricing_arguments(p)
