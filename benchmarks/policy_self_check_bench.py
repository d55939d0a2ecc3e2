"""What the policy's start-up engine self-check costs: seconds from process start to SERVING, with
the check on and off, in alternating rounds of the same run.

Each round starts a real ``ttc serve policy`` on a free port, polls the gRPC health check every
50 ms until it reports SERVING, reads the check's own duration from the log line it writes
(``engine self-check passed: 4 tokens decoded in 1.9s``), and stops it. Prints the median
ready time of each side, the added seconds and the on/off ratio, with the load average; the raw
rounds go to ``docs/data/policy_self_check/``.

    python benchmarks/policy_self_check_bench.py [--model smollm2-135m] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from services.common.ports import free_port  # noqa: E402
from services.policy.models import REGISTRY  # noqa: E402
from tests.helpers.processes import grpc_healthy, start_policy  # noqa: E402

CHECK_LINE = re.compile(r"engine self-check passed: (\d+) tokens decoded in ([\d.]+)s")


def git_describe() -> str:
    return subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def one_start(model: str, check: bool) -> dict[str, object]:
    """Start the policy, time it to SERVING, stop it."""
    port = free_port()
    load = os.getloadavg()[0]
    started = time.monotonic()
    proc = start_policy(model, port, TTC_POLICY_ENGINE_SELF_CHECK=str(check).lower())
    try:
        proc.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), timeout=300)
        ready_s = time.monotonic() - started
    finally:
        proc.stop()
    found = CHECK_LINE.search(proc.log())
    return {
        "check": check,
        "ready_s": round(ready_s, 3),
        "check_s": float(found.group(2)) if found else None,
        "check_tokens": int(found.group(1)) if found else None,
        "loadavg_1m": load,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds = []
    for i in range(args.rounds):
        for check in (True, False) if i % 2 == 0 else (False, True):
            rounds.append(one_start(args.model, check))
            print(json.dumps(rounds[-1]), flush=True)
    on = statistics.median(float(str(r["ready_s"])) for r in rounds if r["check"])
    off = statistics.median(float(str(r["ready_s"])) for r in rounds if not r["check"])
    spec = REGISTRY.get(args.model)
    summary = {
        "benchmark": "policy_self_check",
        "git": git_describe(),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": args.model,
        "model_sha256": spec.sha256 if spec else None,
        "cpus": len(os.sched_getaffinity(0)),
        "loadavg": os.getloadavg(),
        "median_ready_s": {"check_on": on, "check_off": off},
        "added_s": round(on - off, 3),
        "ratio_on_over_off": round(on / off, 3),
        "rounds": rounds,
    }
    out = ROOT / "docs" / "data" / "policy_self_check"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.model}-{summary['when'].replace(':', '')}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"{args.model}: ready in {on:.2f}s with the self-check, {off:.2f}s without: +{on - off:.2f}s "
        f"({on / off:.2f}x); load average {summary['loadavg']}; raw data {path.relative_to(ROOT)}"
    )


if __name__ == "__main__":
    main()
