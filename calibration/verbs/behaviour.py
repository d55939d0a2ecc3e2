"""``behaviour``: run every code candidate of the pools on the model's own test inputs, as
``code_execution`` does when served, so code chosen by execution is priced from the pools
(:mod:`calibration.lib.behaviour_run`). New draws record it as they are drawn; this records it
for the code draws of existing pools (and re-records those of other strategy code). Resumes per
chunk; starts the policy on the chunks' model and a sandbox unless given running targets."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from calibration.lib.behaviour_run import BehaviourRun
from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS

NAME = "behaviour"
HELP = "run the pools' code candidates on model-written inputs, as code_execution does (resumes)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=DEFAULT_POOLS / DEFAULT_MODEL, help="pool folder")
    p.add_argument("--model", default="", help="model to start the policy on (default: the chunks' own)")
    p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: none)")
    p.add_argument("--policy-target", default="", help="a running policy service (default: start one)")
    p.add_argument("--sandbox-target", default="", help="a running sandbox service (default: start one)")
    p.add_argument("--lock", action=argparse.BooleanOptionalAction, default=None,
                   help="take the model lock per chunk (default: when this starts the policy)")  # fmt: skip


def run(a: argparse.Namespace) -> int:
    lock = a.lock if a.lock is not None else not a.policy_target
    recording = BehaviourRun(a.out, a.model, a.hours, a.policy_target, a.sandbox_target, lock)
    done = asyncio.run(recording.run())
    print(f"recorded behaviour in {done} chunk(s)")
    return 0
