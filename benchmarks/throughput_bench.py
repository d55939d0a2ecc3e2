"""Full-stack throughput against the same policy service called directly over gRPC.

Starts Redis, one policy service (llama.cpp or vLLM on the CPU, SmolLM2 by default), one
orchestrator worker and the gateway as real processes. For each concurrency it sends the same
set of distinct prompts twice, alternating: straight to the policy's ``Generate`` (one
greedy candidate each: what the engine alone delivers) and through the gateway at each effort
(HTTP -> planning -> Redis/Celery -> worker -> strategy -> gRPC -> Redis stream -> HTTP).
Generated tokens are the engines' own counts (``usage.completion_tokens`` of each reply,
hidden reasoning included), so a higher effort that samples more still counts what the engine
decoded. Prints tokens/s of both paths and their ratio, measured in one run, with the load
average beside them.

    .venv/bin/python benchmarks/throughput_bench.py --engine llamacpp --concurrency 1,8,32
    .venv/bin/python benchmarks/throughput_bench.py --engine vllm --efforts none

The target: at effort ``none`` and concurrency 8 the stack delivers >= 90% of the engine's
direct tokens/s, on both engines (the stack's own overhead costs at most a tenth).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import grpc
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import provenance, write_raw
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import ROOT, RedisServer

TOPICS = [
    "rivers", "volcanoes", "bread", "owls", "chess", "glaciers", "bicycles", "tea", "comets", "bees",
    "lighthouses", "maps", "violins", "deserts", "coral", "kites", "salt", "trains", "moss", "clocks",
    "whales", "paper", "copper", "tides", "honey", "bridges", "lanterns", "ferns", "wool", "caves",
    "pianos", "harbors",
]  # fmt: skip


def prompts(count: int, round_no: int) -> list[str]:
    """Distinct prompts, never sent before in this run (``round_no`` names the round): no request
    rides a prefix cached by another request or by the other path's round (the engine keeps
    finished prompts for reuse), beyond the chat template both paths share."""
    return [
        f"Write three short sentences about {TOPICS[i % len(TOPICS)]} (round {round_no}, set {i // len(TOPICS)})."
        for i in range(count)
    ]


@dataclass
class Run:
    seconds: float
    tokens: int
    errors: int

    def __add__(self, other: Run) -> Run:
        """Pooled over repeats: all tokens over all seconds."""
        return Run(self.seconds + other.seconds, self.tokens + other.tokens, self.errors + other.errors)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


async def _drive(concurrency: int, texts: list[str], call: Callable[[str], Awaitable[int]]) -> Run:
    """``concurrency`` clients share ``texts``; the run's wall time covers all of them."""
    queue = list(texts)
    tokens = errors = 0

    async def client() -> None:
        nonlocal tokens, errors
        while queue:
            text = queue.pop()
            try:
                generated = await call(text)  # not `tokens += await ...`: that reads tokens before awaiting
                tokens += generated
            except Exception as exc:
                errors += 1
                print(f"error: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return Run(time.perf_counter() - start, tokens, errors)


async def direct(target: str, concurrency: int, texts: list[str], max_tokens: int) -> Run:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = policy_pb2_grpc.PolicyStub(channel)

        async def call(text: str) -> int:
            request = policy_pb2.GenerateRequest(
                model=MODEL,
                input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=text)]),
                sampling=policy_pb2.SamplingParams(n=1, max_tokens=max_tokens, temperature=0.0),
            )
            reply = await stub.Generate(request, timeout=600)
            return int(reply.usage.completion_tokens)

        return await _drive(concurrency, texts, call)


async def through_stack(url: str, effort: str, concurrency: int, texts: list[str], max_tokens: int) -> Run:
    limits = httpx.Limits(max_connections=concurrency * 2)
    async with httpx.AsyncClient(limits=limits, timeout=900) as client:

        async def call(text: str) -> int:
            body = {
                "model": MODEL,
                "messages": [{"role": "user", "content": text}],
                "max_tokens": max_tokens,
                "temperature": 0,
                "reasoning_effort": effort,
            }
            reply = await client.post(f"{url}/v1/chat/completions", json=body)
            if reply.status_code != 200:
                raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:200]}")
            return int(reply.json()["usage"]["completion_tokens"])

        return await _drive(concurrency, texts, call)


def _policy_env(engine: str) -> dict[str, str]:
    if engine == "llamacpp":
        return {"TTC_POLICY_ENGINE": "llamacpp"}
    from services.policy.models import prepare

    prepare(MODEL, ROOT / "models", vllm=True)
    return {
        "TTC_POLICY_ENGINE": "vllm",
        "TTC_POLICY_MODELS_DIR": str(ROOT / "models"),
        "TTC_POLICY_VLLM_MAX_MODEL_LEN": "4096",
        "TTC_POLICY_VLLM_KV_CACHE_GIB": "1",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["llamacpp", "vllm"], default="llamacpp")
    parser.add_argument("--concurrency", default="1,8,32", help="comma-separated client counts")
    parser.add_argument("--efforts", default="none,medium", help="comma-separated efforts for the stack path")
    parser.add_argument("--requests", type=int, default=0, help="prompts per point (default: 2 x concurrency, >= 8)")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=1, help="rounds per point, alternating which path goes first")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    efforts = args.efforts.split(",")
    started = provenance(MODEL, engine=args.engine)

    # A SIGTERM (kill, timeout) unwinds through ``finally`` so the services started here stop too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    redis_server = RedisServer().start()
    stack = GatewayStack(redis_server)
    rows: list[tuple[int, str, Run, Run]] = []
    try:
        stack.start_policy(_policy_env(args.engine))
        stack.start_worker(concurrency=max(levels))
        stack.start_gateway()
        asyncio.run(direct(stack.policy_target, 2, prompts(2, 0), args.max_tokens))  # warm both paths
        asyncio.run(through_stack(stack.url, "none", 2, prompts(2, 1), args.max_tokens))
        rounds = itertools.count(2)
        for level in levels:
            count = args.requests or max(8, 2 * level)
            for effort in efforts:
                base = full = Run(0.0, 0, 0)
                for repeat in range(args.repeats):  # alternate which path goes first: drift biases neither
                    for path in ("direct", "stack") if repeat % 2 == 0 else ("stack", "direct"):
                        texts = prompts(count, next(rounds))
                        if path == "direct":
                            base += asyncio.run(direct(stack.policy_target, level, texts, args.max_tokens))
                        else:
                            full += asyncio.run(through_stack(stack.url, effort, level, texts, args.max_tokens))
                rows.append((level, effort, base, full))
                print(f"... concurrency {level} effort {effort}: direct {base.tokens_per_second:.1f} tok/s, "
                      f"stack {full.tokens_per_second:.1f} tok/s", file=sys.stderr, flush=True)  # fmt: skip
    finally:
        stack.stop()
        redis_server.stop()

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"engine {args.engine}, model {MODEL}, max_tokens {args.max_tokens}, repeats {args.repeats}, "
        f"load average {load}"
    )
    print(f"{'conc':>4} {'effort':>7} {'direct tok/s':>13} {'stack tok/s':>12} {'ratio':>6} {'errors':>7}")
    for level, effort, base, full in rows:
        ratio = full.tokens_per_second / base.tokens_per_second if base.tokens_per_second else 0.0
        errors = base.errors + full.errors
        print(f"{level:>4} {effort:>7} {base.tokens_per_second:>13.1f} {full.tokens_per_second:>12.1f} "
              f"{ratio:>6.2f} {errors:>7}")  # fmt: skip
    target = [r for r in rows if r[0] == 8 and r[1] == "none"]
    if target:
        _, _, base, full = target[0]
        ratio = full.tokens_per_second / base.tokens_per_second if base.tokens_per_second else 0.0
        verdict = "met" if ratio >= 0.9 else f"MISSED by {0.9 - ratio:.2f}"
        print(f"target: effort none, concurrency 8, stack >= 0.90 x direct: {ratio:.2f} ({verdict})")
    raw = {
        "args": vars(args),
        "rows": [
            {"concurrency": level, "effort": effort, "direct": asdict(base), "stack": asdict(full)}
            for level, effort, base, full in rows
        ],
    }
    print("raw results:", write_raw("throughput", raw, model=MODEL, started=started, argv=sys.argv))


if __name__ == "__main__":
    main()
