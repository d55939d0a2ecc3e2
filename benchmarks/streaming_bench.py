"""What streaming the search costs: the stack's generated tokens/s with streaming on against off.

Starts Redis, the policy service (SmolLM2), one orchestrator worker and the gateway as real
processes (``tests/e2e/gateway_stack.py``, as ``gateway_overhead.py`` does), then sends the same
requests (same prompts, same pinned strategy and seeds) at a fixed concurrency in alternating
rounds: streamed (``stream: true``: the search's reasoning deltas and the answer as SSE) and
not streamed (one JSON reply; the worker publishes no reasoning for a waiting request). Each
round's throughput is the generated tokens the replies' usage reports over the round's wall
time, so a round whose samples ran longer is not favoured. Prints tokens/s of both, the ratio
(target: streaming within 5% of not streaming), the SSE events and bytes per streamed request,
the gateway's and the worker's CPU seconds per request, and the load average; writes the raw
rounds to ``docs/data/streaming/``.

    flock /tmp/ttc-model.lock nice .venv/bin/python benchmarks/streaming_bench.py --requests 24
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import DATA, load_average, provenance, write_raw
from tests.e2e.gateway_stack import MODEL, GatewayStack
from tests.helpers.processes import RedisServer, cpu_seconds

PROMPTS = (
    "What is 17 + 25?",
    "Name three colors of the rainbow.",
    "Write a Python function square(x) that returns x squared.",
    "Why is the sky blue? One sentence.",
)


def body(i: int, stream: bool, args: argparse.Namespace) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        "max_tokens": args.max_tokens,
        "temperature": 0.8,
        "seed": i,
        "stream": stream,
        **({"stream_options": {"include_usage": True}} if stream else {}),
        "ttc": {"strategy": args.strategy, "n": args.n, "params": json.loads(args.params)},
    }


async def one(client: httpx.AsyncClient, i: int, stream: bool, args: argparse.Namespace) -> dict[str, Any]:
    """One request; its generated tokens (usage), and for a stream its SSE events and bytes."""
    if not stream:
        reply = await client.post("/v1/chat/completions", json=body(i, False, args))
        reply.raise_for_status()
        return {"tokens": reply.json()["usage"]["completion_tokens"], "events": 1, "bytes": len(reply.content)}
    tokens, events, size, reasoning = 0, 0, 0, 0
    async with client.stream("POST", "/v1/chat/completions", json=body(i, True, args)) as reply:
        reply.raise_for_status()
        async for line in reply.aiter_lines():
            size += len(line) + 1
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            events += 1
            chunk = json.loads(line[6:])
            if chunk.get("error"):
                raise RuntimeError(chunk["error"])
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            elif chunk.get("choices") and chunk["choices"][0]["delta"].get("reasoning_content"):
                reasoning += 1
    return {"tokens": tokens, "events": events, "bytes": size, "reasoning_events": reasoning}


async def round_(stack: GatewayStack, stream: bool, args: argparse.Namespace) -> dict[str, Any]:
    pids = [p.proc.pid for p in (stack.gateway, *stack.workers) if p is not None and p.proc is not None]
    cpu_before = [cpu_seconds(pid, with_children=True) for pid in pids]
    todo = iter(range(args.requests))
    replies: list[dict[str, Any]] = []

    async def worker(client: httpx.AsyncClient) -> None:
        for i in todo:
            replies.append(await one(client, i, stream, args))

    start = time.perf_counter()
    async with httpx.AsyncClient(base_url=stack.url, timeout=300) as client:
        await asyncio.gather(*(worker(client) for _ in range(args.concurrency)))
    wall = time.perf_counter() - start
    cpu = [cpu_seconds(pid, with_children=True) - b for pid, b in zip(pids, cpu_before, strict=True)]
    tokens = sum(r["tokens"] for r in replies)
    return {
        "stream": stream,
        "requests": len(replies),
        "wall_s": round(wall, 3),
        "generated_tokens": tokens,
        "tokens_per_s": round(tokens / wall, 2),
        "sse_events_per_request": round(statistics.mean(r["events"] for r in replies), 1),
        "reasoning_events_per_request": round(statistics.mean(r.get("reasoning_events", 0) for r in replies), 1),
        "bytes_per_request": round(statistics.mean(r["bytes"] for r in replies)),
        "gateway_cpu_s_per_request": round(cpu[0] / len(replies), 4),
        "worker_cpu_s_per_request": round(sum(cpu[1:]) / len(replies), 4),
        "load_average": load_average(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=24, help="requests per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each mode (alternating, off first)")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--strategy", default="self_consistency")
    parser.add_argument("--n", type=int, default=4, help="candidates per request")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--params",
        default='{"logprobs": false}',
        help="strategy params (JSON); self-consistency without its logprob tie-break streams every token",
    )
    args = parser.parse_args()
    started = provenance(
        MODEL, concurrency=args.concurrency, strategy=args.strategy, n=args.n, params=json.loads(args.params)
    )
    redis_server = RedisServer().start()
    stack = GatewayStack(redis_server)
    try:
        stack.start_policy()
        stack.start_worker(concurrency=args.concurrency)
        stack.start_gateway()
        asyncio.run(round_(stack, False, argparse.Namespace(**{**vars(args), "requests": args.concurrency})))  # warm
        rounds = []
        for r in range(args.rounds):
            for stream in (False, True):
                result = asyncio.run(round_(stack, stream, args))
                rounds.append(result)
                mode = "on " if stream else "off"
                print(
                    f"round {r + 1} streaming {mode}: {result['tokens_per_s']:.1f} tok/s "
                    f"({result['generated_tokens']} tokens in {result['wall_s']:.1f}s), "
                    f"{result['sse_events_per_request']} events/request, load {result['load_average']}",
                    flush=True,
                )
    finally:
        stack.stop()
        redis_server.stop()
    on = sum(r["generated_tokens"] for r in rounds if r["stream"]) / sum(r["wall_s"] for r in rounds if r["stream"])
    off = sum(r["generated_tokens"] for r in rounds if not r["stream"]) / sum(
        r["wall_s"] for r in rounds if not r["stream"]
    )
    ratio = on / off
    summary = {"tokens_per_s_on": round(on, 2), "tokens_per_s_off": round(off, 2), "ratio_on_over_off": round(ratio, 4)}
    print(
        f"streaming on {on:.1f} tok/s, off {off:.1f} tok/s: ratio {ratio:.3f} "
        f"({'within' if ratio >= 0.95 else 'OUTSIDE'} the 5% target); load average {load_average()}"
    )
    path = write_raw(
        "streaming", {"summary": summary, "rounds": rounds}, started=started, out_dir=DATA / "streaming", argv=sys.argv
    )
    print(f"raw results: {path}")


if __name__ == "__main__":
    main()
