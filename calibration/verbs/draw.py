"""``draw``: draw candidate pools through the real policy and sandbox services, in resumable
chunks under ``docs/data/calibration/pools/<model>/`` (each under the shared model lock).

Sample once, price many: every configuration is priced offline from these pools
(:mod:`evaluation.pricing`). The run (:class:`calibration.lib.pool_run.PoolRun`) starts its own
policy and sandbox unless given running targets, resumes after the chunks already drawn, and
overlaps a chunk's calls unless ``--sequential``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from calibration.lib.arguments import add_problem_set_arguments, pool_folder
from calibration.lib.drawer import DrawSettings
from calibration.lib.paths import DEFAULT_MODEL
from calibration.lib.pool_run import PoolRun, StaleSettings, data_provenance
from evaluation.problems.datasets import DEVELOPMENT_KEY, split_key
from evaluation.problems.problemset import build_problem_set, check_disjoint, family_names

NAME = "draw"
HELP = "draw pools through the policy and sandbox services (resumes)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_set_arguments(p)
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--split", choices=["calibration", "development"], default="calibration")
    p.add_argument("--out", type=Path, default=None, help="pool folder (default docs/data/calibration/pools/<model>)")
    p.add_argument("--k", type=int, default=8, help="sampled candidates per kind (plus one greedy)")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--cot-max-tokens", type=int, default=DrawSettings.cot_max_tokens)
    p.add_argument("--code-max-tokens", type=int, default=DrawSettings.code_max_tokens)
    p.add_argument("--chunk-size", type=int, default=5, help="problems per chunk file")
    p.add_argument("--max-problems", type=int, default=0, help="draw at most this many of the split (0: all)")
    p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: no limit)")
    p.add_argument("--redraw-stale", action="store_true", help="re-draw chunks of another program version/settings")
    p.add_argument("--sequential", action="store_true",
                   help="make a chunk's calls one after another (no overlap, no latency probe: each call's own "
                        "wall time fits the latency model)")  # fmt: skip
    p.add_argument("--policy-target", default="", help="a running policy service (default: start one)")
    p.add_argument("--sandbox-target", default="", help="a running sandbox service (default: start one)")


def run(a: argparse.Namespace) -> int:
    split = split_key(a.split)
    problems = build_problem_set(split, per_family=a.per_family, seed=a.seed, families=family_names(a.families))
    other = build_problem_set(DEVELOPMENT_KEY if split == "calibration" else "calibration", per_family=a.per_family,
                              seed=a.seed, families=family_names(a.families))  # fmt: skip
    check_disjoint(*((problems, other) if split == "calibration" else (other, problems)))
    if a.max_problems:
        problems = problems[: a.max_problems]
    settings = DrawSettings(k=a.k, temperature=a.temperature, cot_max_tokens=a.cot_max_tokens,
                            code_max_tokens=a.code_max_tokens, seed=a.seed)  # fmt: skip
    run = PoolRun(
        model=a.model, split=split, problems=problems, directory=pool_folder(a),
        settings=settings, data=data_provenance(split, a.seed, a.per_family, family_names(a.families)),
        chunk_size=a.chunk_size, redraw_stale=a.redraw_stale, hours=a.hours,
        policy_target=a.policy_target, sandbox_target=a.sandbox_target, overlap=not a.sequential,
    )  # fmt: skip
    try:
        asyncio.run(run.run())
    except StaleSettings as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
