"""Gateway + queue overhead against calling the policy service directly.

Starts Redis, the policy service (SmolLM2), one orchestrator worker and the gateway as real
processes, then sends the same single-sample request (effort ``none``, greedy, a few tokens)
at a fixed concurrency twice: straight to the policy's gRPC ``Generate``, and through the
gateway (HTTP → validation → Redis/Celery → worker → gRPC → Redis stream → HTTP). Prints
p50/p90 latency of both and the added p50 (target <= 10 ms at concurrency 16) with the error count, and the CPU
time the gateway and the worker processes spent per request (from /proc, so it holds even on a
busy machine), which is what competes with decoding on a small host. ``--profile DIR`` samples
the gateway and the worker with py-spy (``pip install py-spy``) during the gateway rounds,
writes their collapsed stacks there and prints the functions with the most samples.

    .venv/bin/python benchmarks/gateway_overhead.py --requests 160 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import grpc
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import provenance, write_raw
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer, ServiceProcess, cpu_seconds

PROMPT = "Say OK."


async def _run(concurrency: int, total: int, call: object) -> tuple[list[float], int]:
    latencies: list[float] = []
    errors = 0
    counter = iter(range(total))

    async def worker() -> None:
        nonlocal errors
        for _ in counter:
            start = time.perf_counter()
            try:
                await call()  # type: ignore[operator]
            except Exception as exc:
                errors += 1
                print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            latencies.append(time.perf_counter() - start)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, errors


async def direct(stack: GatewayStack, args: argparse.Namespace) -> tuple[list[float], int]:
    channel = grpc.aio.insecure_channel(stack.policy_target)
    stub = policy_pb2_grpc.PolicyStub(channel)
    request = policy_pb2.GenerateRequest(
        model=MODEL,
        input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=PROMPT)]),
        sampling=policy_pb2.SamplingParams(n=1, max_tokens=args.max_tokens, temperature=0.0),
    )

    async def call() -> None:
        reply = await stub.Generate(request, timeout=120)
        assert reply.candidates

    try:
        return await _run(args.concurrency, args.requests, call)
    finally:
        await channel.close()


async def through_gateway(stack: GatewayStack, args: argparse.Namespace) -> tuple[list[float], int]:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "reasoning_effort": "none",
    }
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=args.concurrency * 2)) as client:

        async def call() -> None:
            reply = await client.post(f"{stack.url}/v1/chat/completions", json=body, timeout=120)
            if reply.status_code != 200:
                raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:200]}")

        return await _run(args.concurrency, args.requests, call)


def _service_cpu(services: list[ServiceProcess | None]) -> float:
    """CPU seconds of these services' processes, their pool children included."""
    total = 0.0
    for pid in _pids(services):
        total += cpu_seconds(pid, with_children=True)
    return total


def _start_profiles(folder: Path, stack: GatewayStack) -> list[tuple[str, subprocess.Popen[bytes], Path]]:
    """py-spy samplers on the gateway and the first worker (with its pool children)."""
    folder.mkdir(parents=True, exist_ok=True)
    samplers = []
    for name, service in (("gateway", stack.gateway), ("worker", stack.workers[0])):
        assert service is not None and service.proc is not None
        out = folder / f"{name}.collapsed"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        cmd = [spy, "record", "--pid", str(service.proc.pid), "--subprocesses", "--rate", "250"]
        cmd += ["--format", "raw", "--output", str(out), "--nonblocking"]
        samplers.append((name, subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), out))
    time.sleep(1.0)
    return samplers


def _stop_profiles(samplers: list[tuple[str, subprocess.Popen[bytes], Path]], top: int = 15) -> None:
    """Stop the samplers and print, per process, where its samples were (innermost project frame)."""
    for name, proc, out in samplers:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
        counts: Counter[str] = Counter()
        total = 0
        for line in out.read_text().splitlines() if out.exists() else []:
            stack_text, _, samples = line.rpartition(" ")
            frames = stack_text.split(";")
            total += int(samples)
            ours = [f for f in frames if "services/" in f or "celery" in f or "uvicorn" in f or "starlette" in f]
            counts[(ours or frames)[-1]] += int(samples)
        print(f"{name}: {total} samples, top frames (innermost project/framework frame):")
        for frame, n in counts.most_common(top):
            print(f"  {100 * n / max(1, total):5.1f}%  {frame}")


def _pids(services: list[ServiceProcess | None]) -> list[int]:
    return [s.proc.pid for s in services if s is not None and s.proc is not None]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="alternating direct/gateway rounds")
    parser.add_argument("--profile", type=Path, default=None, help="sample gateway and worker with py-spy, write here")
    args = parser.parse_args()
    started = provenance(MODEL)

    redis_server = RedisServer().start()
    stack = GatewayStack(redis_server)
    try:
        stack.start_policy()
        stack.start_worker(concurrency=args.concurrency)
        stack.start_gateway()
        # Warm both paths (connections, engine caches) before measuring.
        asyncio.run(direct(stack, argparse.Namespace(**{**vars(args), "requests": args.concurrency})))
        asyncio.run(through_gateway(stack, argparse.Namespace(**{**vars(args), "requests": args.concurrency})))
        base: list[float] = []
        gw: list[float] = []
        base_err = gw_err = 0
        gateway_cpu = worker_cpu = 0.0
        samplers = _start_profiles(args.profile, stack) if args.profile is not None else []
        for _ in range(args.rounds):  # alternate so machine-load drift hits both paths alike
            lat, err = asyncio.run(direct(stack, args))
            base += lat
            base_err += err
            before = _service_cpu([stack.gateway]), _service_cpu(list(stack.workers))
            lat, err = asyncio.run(through_gateway(stack, args))
            gateway_cpu += _service_cpu([stack.gateway]) - before[0]
            worker_cpu += _service_cpu(list(stack.workers)) - before[1]
            gw += lat
            gw_err += err
        _stop_profiles(samplers)
    finally:
        stack.stop()
        redis_server.stop()

    b50, g50 = statistics.median(base) * 1000, statistics.median(gw) * 1000
    print(
        f"single-sample requests, concurrency {args.concurrency}, max_tokens {args.max_tokens}, "
        f"{len(base)} direct / {len(gw)} gateway requests"
    )
    print(f"direct policy gRPC : p50 {b50:8.1f} ms  p90 {_pct(base, 0.9):8.1f} ms  errors {base_err}")
    print(f"gateway + queue    : p50 {g50:8.1f} ms  p90 {_pct(gw, 0.9):8.1f} ms  errors {gw_err}")
    print(f"added p50 latency  : {g50 - b50:8.1f} ms (target <= 10 ms at concurrency 16)   ratio {g50 / b50:.2f}x")
    print(f"errors             : {base_err + gw_err} (target 0)")
    per = max(1, len(gw))
    print(
        f"CPU per request    : gateway {1000 * gateway_cpu / per:.1f} ms, worker {1000 * worker_cpu / per:.1f} ms"
        f"   load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    results = {
        "args": vars(args) | {"profile": str(args.profile) if args.profile else None},
        "direct_latency_s": base,
        "gateway_latency_s": gw,
        "errors": {"direct": base_err, "gateway": gw_err},
        "cpu_s": {"gateway": gateway_cpu, "worker": worker_cpu},
        "p50_ms": {"direct": b50, "gateway": g50, "added": g50 - b50},
    }
    print("raw results:", write_raw("gateway_overhead", results, model=MODEL, started=started, argv=sys.argv))


if __name__ == "__main__":
    main()
