"""Gateway + queue overhead against calling the policy service directly.

Starts Redis, the policy service (SmolLM2), one orchestrator worker and the gateway as real
processes, then sends the same single-sample request (effort ``none``, greedy, a few tokens)
at a fixed concurrency twice: straight to the policy's gRPC ``Generate``, and through the
gateway (HTTP → validation → Redis/Celery → worker → gRPC → Redis stream → HTTP). Prints
p50/p90 latency of both and the added p50 (target < 15 ms) with the error count.

    .venv/bin/python benchmarks/gateway_overhead.py --requests 160 --concurrency 16
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import grpc
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer

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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="alternating direct/gateway rounds")
    args = parser.parse_args()

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
        for _ in range(args.rounds):  # alternate so machine-load drift hits both paths alike
            lat, err = asyncio.run(direct(stack, args))
            base += lat
            base_err += err
            lat, err = asyncio.run(through_gateway(stack, args))
            gw += lat
            gw_err += err
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
    print(f"added p50 latency  : {g50 - b50:8.1f} ms (target < 15 ms)   ratio {g50 / b50:.2f}x")
    print(f"errors             : {base_err + gw_err} (target 0)")


if __name__ == "__main__":
    main()
