"""``python -m loadtests full``: the whole cost-versus-accuracy study in one command.

1. a calibration run: pinned configurations on calibration-split problems;
2. calibrate: difficulty estimator + routing table (``<out>/calibration/routing.json``);
3. when this command started the stack, restart the gateway's stack on the new table;
4. a held-out run: the same pinned configurations plus free routing at every effort, on
   held-out problems only (the splits are asserted disjoint);
5. the report: ``<out>/report/report.html`` with the calibration section.

When no gateway answers at ``--base-url``, the local stack (``ttc stack``) is started with
``TTC_POLICY_MODEL=--model`` and stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from loadtests.grid import EFFORTS, build_grid, split_list
from loadtests.runner import run

# What the effort ladder may choose from (issue 11): greedy chain of thought (the `none` rung),
# self-consistency, program-of-thought alone and voting (early stopping on), and the hybrid.
DEFAULT_CONFIGS = (
    "single:greedy=true,self_consistency:n=3,self_consistency:n=6,program_of_thought:n=1,"
    "program_of_thought:n=4,program_of_thought:n=6:mode=hybrid"
)


def _healthy(base_url: str) -> bool:
    try:
        return httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


class Stack:
    """``ttc stack`` as a child process (its own process group, stopped with SIGTERM)."""

    def __init__(self, model: str, base_url: str, log: Path) -> None:
        self.model, self.base_url, self.log = model, base_url, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, routing_table: Path | None = None, timeout: float = 900.0) -> None:
        env = {**os.environ, "TTC_POLICY_MODEL": self.model, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        if routing_table is not None:
            # This table routes every model, the one with a shipped table of its own included.
            env["TTC_GATEWAY_ROUTING_TABLE"] = str(routing_table.resolve())
            env["TTC_GATEWAY_ROUTING_TABLES"] = ""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "services.cli", "stack"], env=env, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while not _healthy(self.base_url):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the stack exited ({self.proc.returncode}); see {self.log}")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the stack was not ready after {timeout:.0f}s; see {self.log}")
            time.sleep(1.0)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def _raise_on_sigterm() -> None:
    """SIGTERM as Ctrl-C, so ``finally`` stops the stack this command started. Re-armed before
    each phase because the runner's event loop restores the default handler when it ends."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("terminated")

    signal.signal(signal.SIGTERM, handler)


def cmd_full(a: argparse.Namespace) -> int:
    from loadtests.calibrate import calibrate
    from loadtests.cli import _config, make_report

    datasets = split_list(a.datasets)
    levels = [int(x) for x in split_list(a.levels)]
    per_level = max(1, math.ceil(a.problems / max(1, len(datasets) * len(levels))))
    a.problems = per_level
    configs = split_list(a.configs)
    efforts = split_list(a.efforts) if a.efforts else list(EFFORTS)
    out: Path = a.out
    stack: Stack | None = None
    _raise_on_sigterm()
    if not _healthy(a.base_url) and not a.no_start_stack:
        print(f"no gateway at {a.base_url}: starting the local stack with {a.model} (log {out / 'stack.log'})")
        stack = Stack(a.model, a.base_url, out / "stack.log")
        stack.start()
    try:
        # 1. calibration run: pinned configurations only (the effort label does not change a pinned request).
        a.efforts, a.strategies = a.calibration_effort, ",".join(configs)
        config, cells, problems = _config(a, out / "calibration-run", split="calibration")
        asyncio.run(run(config, cells, problems))
        _raise_on_sigterm()
        # 2. calibrate.
        calibrate(out / "calibration-run", out / "calibration", base_table=a.base_table,
                  use_embeddings=not a.no_embeddings)  # fmt: skip
        table = out / "calibration" / "routing.json"
        if stack is not None:  # 3. the gateway loads its table at start: restart on the calibrated one
            stack.stop()
            stack.start(routing_table=table)
        else:
            print(f"note: the running gateway keeps its own routing table; to use the calibrated one restart it "
                  f"with TTC_GATEWAY_ROUTING_TABLE={table}")  # fmt: skip
        # 4. held-out run: fixed configurations (for the comparison) and free routing at every effort.
        build_grid(efforts, ["auto"])  # validate before sending load
        a.efforts, a.strategies = a.calibration_effort, ",".join(configs)
        config, fixed_cells, problems = _config(a, out / "heldout-run", split="heldout")
        auto_cells = build_grid(efforts, ["auto"])
        asyncio.run(run(config, [*fixed_cells, *auto_cells], problems))
        _raise_on_sigterm()
        calibrate(out / "calibration-run", out / "calibration", base_table=a.base_table,
                  heldout_run=out / "heldout-run", use_embeddings=not a.no_embeddings)  # fmt: skip
        # 5. report.
        page = make_report([out / "heldout-run"], out / "report", a, out / "calibration" / "calibration.json")
        print(f"report: {page}")
        return 0
    finally:
        if stack is not None:
            stack.stop()


def add_full_parser(
    sub: Any,
    run_args: Callable[[argparse.ArgumentParser], None],
    pricing_args: Callable[[argparse.ArgumentParser], None],
) -> None:
    p = sub.add_parser("full", help="calibration run, calibrate, held-out run, report (make loadtest)")
    run_args(p)
    p.set_defaults(func=cmd_full, problems=108, efforts="", out=Path("reports/loadtest"), max_tokens=192)
    for action in p._actions:  # --problems means the total here; --out has a default
        if action.dest == "problems":
            action.help = "held-out problems in total (the calibration run uses as many), spread over sets x levels"
        if action.dest == "out":
            action.required = False
        if action.dest == "efforts":
            action.help = "efforts routed freely in the held-out run (default: every effort)"
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="pinned configurations measured in both runs")
    p.add_argument("--calibration-effort", default="medium", help="effort label of the pinned requests")
    p.add_argument("--base-table", type=Path, default=Path("services/gateway/routing/routing.v1.json"))
    p.add_argument("--no-embeddings", action="store_true")
    p.add_argument("--no-start-stack", action="store_true", help="fail instead of starting the local stack")
    pricing_args(p)
