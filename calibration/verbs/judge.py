"""``judge``: every generative judge's score (``orm``, ``prm``) for every pool candidate, through
the real verifier service on the pool's own model, so best-of-n and the judge-weighted vote can
be priced offline (:mod:`calibration.lib.judging`). Resumes per chunk; ``--backfill`` only
apportions old chunks' judged totals over their candidates (no model)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import grpc

from calibration.lib.judging import JudgeRun, backfill
from calibration.lib.paths import DEFAULT_MODEL, DEFAULT_POOLS

NAME = "judge"
HELP = "score every pool candidate with the verifier's generative judges (resumes)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=DEFAULT_POOLS / DEFAULT_MODEL, help="pool folder")
    p.add_argument("--judges", default="orm", help="comma-separated generative verifiers (orm, prm)")
    p.add_argument("--model", default="", help="model to start the policy on (default: the chunks' own)")
    p.add_argument("--hours", type=float, default=0.0, help="stop starting chunks after this long (0: none)")
    p.add_argument("--policy-target", default="", help="a running policy service (default: start one)")
    p.add_argument("--verifier-target", default="", help="a running verifier service (default: start one)")
    p.add_argument("--backfill", action="store_true",
                   help="only apportion old chunks' judged totals over their candidates (no model)")  # fmt: skip
    p.add_argument("--lock", action=argparse.BooleanOptionalAction, default=None,
                   help="take the model lock per chunk (default: when this starts the policy)")  # fmt: skip


def run(a: argparse.Namespace) -> int:
    if a.backfill:
        rewritten = backfill(a.out)
        print("".join(f"{p}\n" for p in rewritten) + f"backfilled {len(rewritten)} chunk(s)")
        return 0
    judges = [j for j in a.judges.split(",") if j]
    lock = a.lock if a.lock is not None else not (a.policy_target or a.verifier_target)
    judging = JudgeRun(a.out, judges, a.model, a.hours, a.policy_target, a.verifier_target, lock)
    try:
        done = asyncio.run(judging.run())
    except grpc.aio.AioRpcError as err:
        print(f"error: verifier call failed: {err.code().name}: {err.details()}", file=sys.stderr)
        return 1
    print(f"judged {done} chunk(s)")
    return 0
