"""Continuous batching in the llama.cpp engine: concurrent users against the serialized engine.

``--concurrency`` single-sample requests with distinct prompts are sent at once to the engine
(in-process, no gRPC), first with ``parallel_requests = 1`` (today's serialized engine: one
request at a time, the others wait) and then with continuous batching (every request in one
decode loop). Reported: total generated tokens/s of each side and their ratio, per model, with
the load average before and after (the machine must be quiet for the ratio to mean anything).
Sides alternate for ``--repeats`` rounds and the medians are compared, so load that drifts
during the run biases neither side. Batching is worth its complexity if it reaches >= 1.7x for
SmolLM2 at 8 requests.

    python benchmarks/llamacpp_batching_bench.py [--models smollm2-135m qwen2.5-coder-0.5b]
        [--concurrency 8] [--max-tokens 96] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.pools.provenance import model_sha256, provenance, write_raw  # noqa: E402
from services.policy.engines import create_engine  # noqa: E402
from services.policy.engines.base import Engine, Message, Prompt, Sampling  # noqa: E402
from services.policy.settings import PolicySettings  # noqa: E402

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a bicycle stays upright.",
    "Describe the water cycle to a ten-year-old.",
    "List some tips for learning a new language.",
    "What makes a good cup of coffee?",
    "Summarize the plot of a heist movie you invent.",
    "Why do leaves change colour in autumn?",
    "Give advice to someone starting to run.",
    "Describe a city on Mars in the year 2200.",
    "How does a refrigerator keep food cold?",
    "Write a letter to your future self.",
    "What are the rules of chess for a pawn?",
    "Explain recursion with an example.",
    "Plan a three-day trip to the mountains.",
    "Why is sleep important?",
    "Invent a new board game and explain it.",
]


async def burst(engine: Engine, concurrency: int, max_tokens: int, seed: int) -> tuple[int, float]:
    """Send ``concurrency`` requests at once; return (generated tokens, wall seconds)."""
    sampling = Sampling(n=1, seeds=(seed,), max_tokens=max_tokens, temperature=0.8, top_p=0.95)
    prompts = [Prompt(messages=(Message("user", PROMPTS[i % len(PROMPTS)]),)) for i in range(concurrency)]
    start = time.perf_counter()
    gens = await asyncio.gather(*(engine.generate(p, sampling, f"bench-{i}") for i, p in enumerate(prompts)))
    wall = time.perf_counter() - start
    return sum(c.completion_tokens for g in gens for c in g.completions), wall


async def measure(model: str, concurrency: int, max_tokens: int, repeats: int) -> dict[str, object]:
    engines = {
        side: await create_engine(PolicySettings(model=model, parallel_requests=parallel))
        for side, parallel in (("serialized", 1), ("batched", max(concurrency, 1)))
    }
    rates: dict[str, list[float]] = {side: [] for side in engines}
    try:
        for engine in engines.values():  # warm-up: page the weights in, fill caches
            await burst(engine, 2, 8, 0)
        for r in range(repeats):
            for side, engine in engines.items():
                tokens, wall = await burst(engine, concurrency, max_tokens, seed=1000 + r)
                rates[side].append(tokens / wall)
    finally:
        for engine in engines.values():
            await engine.close()
    serialized, batched = statistics.median(rates["serialized"]), statistics.median(rates["batched"])
    return {
        "model": model,
        "concurrency": concurrency,
        "serialized_tok_s": round(serialized, 1),
        "batched_tok_s": round(batched, 1),
        "ratio": round(batched / serialized, 2),
        "rounds": {side: [round(x, 1) for x in xs] for side, xs in rates.items()},
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m", "qwen2.5-coder-0.5b"])
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    started = provenance(None, models={m: model_sha256(m) for m in args.models})
    load_before = os.getloadavg()
    results = [await measure(m, args.concurrency, args.max_tokens, args.repeats) for m in args.models]
    load_after = os.getloadavg()
    for r in results:
        print(
            f"{r['model']}: {r['concurrency']} concurrent requests, batched {r['batched_tok_s']} tok/s vs "
            f"serialized {r['serialized_tok_s']} tok/s = {r['ratio']}x"
        )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); cores {os.cpu_count()}")
    print(json.dumps({"results": results, "loadavg_before": load_before, "loadavg_after": load_after}))
    raw = {"args": vars(args), "results": results}
    print("raw results:", write_raw("llamacpp_batching", raw, started=started, argv=sys.argv))


if __name__ == "__main__":
    asyncio.run(main())
