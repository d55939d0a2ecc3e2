"""The sandbox's backends against each other and against a bare ``python -c`` subprocess.

    .venv/bin/python benchmarks/sandbox_backends_bench.py [--runs 40] [--concurrency 4] [--rounds 4]

Starts podman's Docker-compatible API on a private socket (building the sandbox image if it
is missing) and two sandbox services on free ports: ``bwrap`` and ``docker``. Every side runs
the same trivial program at the same concurrency, alternating in rounds so that load from
other processes falls on all alike:

- ``bare``: ``python3 -c`` as a plain subprocess;
- ``bwrap``: through gRPC, the pool, setpriv, prlimit and bubblewrap;
- ``docker``: through gRPC and the pool into a fresh container per execution (create, attach,
  start, the init, auto-remove): what the docker backend does;
- ``warm exec``: ``docker exec`` of the program in an already running, equally locked-down
  container, the cost floor of a warm pool (which would also have to clean the container
  between executions: kill leftovers, empty its tmpfs, and could not give each execution its
  own memory cgroup limit or OOM verdict).

Printed: executions per second, median and p95 latency, the latency added per run over bare
python, and each side's ratios to bare python, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sandbox_bench import bare, measure, p95
from evaluation.pools.provenance import provenance, write_raw
from services.common.sandbox_client import SandboxClient
from services.gen.ttc.v1 import sandbox_pb2
from services.sandbox.container_spec import ContainerConfig, create_options
from services.sandbox.limits import resolve_limits
from services.sandbox.settings import SandboxSettings
from tests.helpers import podman
from tests.helpers.processes import SandboxService, start_sandbox

PROGRAM = "print(1)"


def warm_container(api: Any, settings: SandboxSettings, uid: int) -> str:
    """A running container with the docker backend's options, idling, to exec programs into."""
    config = ContainerConfig(
        image=settings.docker_image,
        python=settings.docker_python,
        cpus=settings.docker_cpus,
        tmpfs_bytes=settings.tmpfs_bytes,
        max_open_files=settings.max_open_files,
        instance="bench-warm-" + uuid.uuid4().hex[:6],
    )
    options = create_options(config, resolve_limits(None, settings), uid)
    options["command"] = [settings.docker_python, "-c", "import time; time.sleep(3600)"]
    options["stdin_open"] = False
    container = str(api.create_container(**options)["Id"])
    api.start(container)
    return container


async def run(args: argparse.Namespace) -> None:
    docker = __import__("docker")
    started = provenance(None)
    load_before = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    runtime = podman.LazyPodman()
    services: list[SandboxService] = []
    threads = ThreadPoolExecutor(max_workers=args.concurrency)
    api = None
    warm: list[str] = []
    try:
        url = runtime.get().url
        env = {"TTC_SANDBOX_TMPFS_BYTES": str(16 << 20), "TTC_LOG_LEVEL": "WARNING"}
        services.append(start_sandbox(69300, args.concurrency, TTC_SANDBOX_BACKEND="bwrap", **env))
        services.append(
            start_sandbox(69310, args.concurrency, TTC_SANDBOX_BACKEND="docker", TTC_SANDBOX_DOCKER_URL=url, **env)
        )
        settings = SandboxSettings(tmpfs_bytes=16 << 20)
        api = docker.APIClient(base_url=url, version="auto", timeout=60)
        warm = [warm_container(api, settings, 69320 + i) for i in range(args.concurrency)]
        free: asyncio.Queue[str] = asyncio.Queue()
        for container in warm:
            free.put_nowait(container)
        python = settings.python_path
        async with SandboxClient(services[0].target) as bwrap_client, SandboxClient(services[1].target) as dock_client:

            def through(client: SandboxClient) -> Callable[[], Awaitable[None]]:
                async def one() -> None:
                    reply = await client.execute(PROGRAM)
                    if reply.outcome.status != sandbox_pb2.EXEC_STATUS_OK or reply.outcome.stdout != b"1\n":
                        raise RuntimeError(f"sandbox run failed: {reply}")

                return one

            def exec_in(container: str) -> bytes:
                exec_id = api.exec_create(container, [settings.docker_python, "-I", "-S", "-c", PROGRAM])
                return bytes(api.exec_start(exec_id))

            async def warm_exec() -> None:
                container = await free.get()
                try:
                    out = await asyncio.get_running_loop().run_in_executor(threads, exec_in, container)
                finally:
                    free.put_nowait(container)
                if out.strip() != b"1":
                    raise RuntimeError(f"exec failed: {out!r}")

            sides: dict[str, Callable[[], Awaitable[None]]] = {
                "bare": lambda: bare(python),
                "bwrap": through(bwrap_client),
                "docker": through(dock_client),
                "warm exec": warm_exec,
            }
            for one in sides.values():  # warm up every path
                await measure(one, args.concurrency * 2, args.concurrency)
            rows = []
            for concurrency in sorted({1, args.concurrency}):
                per_round = max(args.runs // args.rounds, concurrency)
                spent = {name: (0.0, list[float]()) for name in sides}
                for _ in range(args.rounds):
                    for name, one in sides.items():
                        rate, lat = await measure(one, per_round, concurrency)
                        seconds, all_lat = spent[name]
                        spent[name] = (seconds + per_round / rate, all_lat + lat)
                total = per_round * args.rounds
                rows.append((concurrency, total, {n: (total / s, lat) for n, (s, lat) in spent.items()}))
    finally:
        if api is not None:
            for container in warm:
                api.remove_container(container, force=True)
        for service in services:
            service.process.stop()
        runtime.stop()
        threads.shutdown()

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"trivial program {PROGRAM!r}, {os.cpu_count()} CPUs, load average {load_before} before, {load} after")
    for concurrency, runs, results in rows:
        base_rate, base_lat = results["bare"]
        print(f"\nconcurrency {concurrency}, {runs} runs per side")
        print(
            f"{'side':>10} | {'exec/s':>7} {'p50 ms':>7} {'p95 ms':>7} {'added ms':>8} | "
            f"{'rate ratio':>10} {'p50 ratio':>9}"
        )
        for name, (rate, lat) in results.items():
            added = (statistics.median(lat) - statistics.median(base_lat)) * 1e3
            print(
                f"{name:>10} | {rate:>7.1f} {statistics.median(lat) * 1e3:>7.1f} {p95(lat) * 1e3:>7.1f} "
                f"{added:>8.1f} | {rate / base_rate:>10.3f} "
                f"{statistics.median(lat) / statistics.median(base_lat):>9.1f}"
            )
    raw = {
        "args": vars(args),
        "program": PROGRAM,
        "rows": [
            {"concurrency": c, "runs": n, "sides": {k: {"exec_s": r, "latency_s": lat} for k, (r, lat) in res.items()}}
            for c, n, res in rows
        ],
    }
    print("raw results:", write_raw("sandbox_backends", raw, started=started, argv=sys.argv))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="runs per side and concurrency")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per side")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
