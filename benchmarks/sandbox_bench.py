"""Sandbox throughput and latency against a bare ``python -c`` subprocess, measured in one run.

    .venv/bin/python benchmarks/sandbox_bench.py [--runs 200] [--concurrency 4] [--rounds 5] [--target HOST:PORT]

Without ``--target`` it starts its own sandbox service (real bwrap) on free ports. Both sides
run the same trivial program with the same interpreter and the same concurrency; the
sandbox side goes through gRPC, validation, the pool, setpriv, prlimit and bwrap.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import provenance, write_raw
from services.common.ports import free_port
from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.settings import SandboxSettings
from tests.helpers.processes import ServiceProcess, grpc_healthy

PROGRAM = "print(1)"


async def measure(one: Callable[[], Awaitable[None]], runs: int, concurrency: int) -> tuple[float, list[float]]:
    """Executions per second and per-run latencies, ``concurrency`` runs in flight at a time."""
    latencies: list[float] = []
    remaining = runs

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            start = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - start)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return runs / (time.perf_counter() - start), latencies


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[94]


async def bare(python: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        python, "-c", PROGRAM, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0 or out != b"1\n":
        raise RuntimeError(f"bare python failed: {proc.returncode}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per side")
    parser.add_argument("--target", default="", help="an already running sandbox; default: start one")
    args = parser.parse_args()
    started = provenance(None)

    service = None
    target = args.target
    if not target:
        port = free_port()
        service = ServiceProcess(
            "sandbox",
            env={
                "TTC_SANDBOX_PORT": str(port),
                "TTC_SANDBOX_METRICS_PORT": str(free_port()),
                "TTC_SANDBOX_MAX_CONCURRENCY": str(args.concurrency),
                "TTC_LOG_LEVEL": "WARNING",
            },
        ).start()
        service.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 60)
        target = f"127.0.0.1:{port}"
    python = SandboxSettings().python_path
    try:
        async with SandboxClient(target) as client:

            async def sandboxed() -> None:
                reply = await client.execute(PROGRAM)
                if reply.outcome.status != sandbox_pb2.EXEC_STATUS_OK or reply.outcome.stdout != b"1\n":
                    raise RuntimeError(f"sandbox run failed: {reply}")

            # Warm up both paths, then measure each at concurrency 1 and at the asked concurrency.
            await measure(lambda: bare(python), 10, args.concurrency)
            await measure(sandboxed, 10, args.concurrency)
            rows = []
            for concurrency in sorted({1, args.concurrency}):
                runs = max(args.runs // 2, 20) if concurrency == 1 else args.runs
                # Alternate the two sides in rounds, so that load from other processes on a
                # shared machine falls on both alike.
                sides: dict[str, tuple[float, list[float]]] = {"bare": (0.0, []), "sandbox": (0.0, [])}
                per_round = max(runs // args.rounds, concurrency)
                for _ in range(args.rounds):
                    for name, one in (("bare", lambda: bare(python)), ("sandbox", sandboxed)):
                        rate, lat = await measure(one, per_round, concurrency)
                        seconds, all_lat = sides[name]
                        sides[name] = (seconds + per_round / rate, all_lat + lat)
                total = per_round * args.rounds
                base_rate, base_lat = total / sides["bare"][0], sides["bare"][1]
                box_rate, box_lat = total / sides["sandbox"][0], sides["sandbox"][1]
                rows.append((concurrency, total, base_rate, base_lat, box_rate, box_lat))
    finally:
        if service is not None:
            service.stop()

    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"trivial program {PROGRAM!r}, interpreter {python}, {os.cpu_count()} CPUs, load average {load}")
    print(
        f"{'conc':>4} {'runs':>5} | {'bare exec/s':>11} {'p50 ms':>7} {'p95 ms':>7} | "
        f"{'sandbox exec/s':>14} {'p50 ms':>7} {'p95 ms':>7} | {'rate ratio':>10} {'p95 ratio':>9}"
    )
    for concurrency, runs, base_rate, base_lat, box_rate, box_lat in rows:
        print(
            f"{concurrency:>4} {runs:>5} | {base_rate:>11.1f} {statistics.median(base_lat) * 1e3:>7.1f} "
            f"{p95(base_lat) * 1e3:>7.1f} | {box_rate:>14.1f} {statistics.median(box_lat) * 1e3:>7.1f} "
            f"{p95(box_lat) * 1e3:>7.1f} | {box_rate / base_rate:>10.2f} {p95(box_lat) / p95(base_lat):>9.2f}"
        )
    raw = {
        "args": vars(args),
        "program": PROGRAM,
        "rows": [
            {
                "concurrency": c,
                "runs": n,
                "bare_exec_s": br,
                "bare_latency_s": bl,
                "sandbox_exec_s": sr,
                "sandbox_latency_s": sl,
            }
            for c, n, br, bl, sr, sl in rows
        ],
    }
    print("raw results:", write_raw("sandbox", raw, started=started, argv=sys.argv))


if __name__ == "__main__":
    asyncio.run(main())
