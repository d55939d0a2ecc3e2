"""Grammar overhead on the llama.cpp engine: the same request free, under a JSON-schema grammar
(each candidate draws freely and only checks the token against the grammar, masking the whole
vocabulary when it is rejected), and under the same grammar masking every step.

    flock /tmp/ttc-model.lock nice python benchmarks/llamacpp_grammar_bench.py --model qwen2.5-coder-0.5b

Prints tokens per second per mode, how many draws the grammar rejected, the ratios against free
text measured in the same run, and the load average beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # evaluation/ is not installed

from evaluation.pools.provenance import provenance, write_raw
from services.policy.engines.base import Constraint, Message, Prompt, Sampling
from services.policy.engines.llamacpp import grammar as lg
from services.policy.engines.llamacpp.engine import LlamaCppEngine
from services.policy.models import gguf_path
from services.policy.settings import PolicySettings

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 3},
    },
    "required": ["name", "age", "hobbies"],
    "additionalProperties": False,
}
COUNTS = {"draws": 0, "masked": 0}
_SAMPLE = lg.CandidateSampler.sample
_RESAMPLE = lg.CandidateSampler._resample


def _counting_sample(self: lg.CandidateSampler, ctx: Any, idx: int) -> int:
    COUNTS["draws"] += 1
    return _SAMPLE(self, ctx, idx)


def _counting_resample(self: lg.CandidateSampler, ctx: Any, idx: int) -> int:
    COUNTS["masked"] += 1
    return _RESAMPLE(self, ctx, idx)


def _mask_always(self: lg.CandidateSampler, ctx: Any, idx: int) -> int:
    if self.grammar is None:
        return _counting_sample(self, ctx, idx)
    COUNTS["draws"] += 1
    token = _counting_resample(self, ctx, idx)
    llama_cpp.llama_sampler_accept(self.grammar, token)
    return token


async def run(model: str, rounds: int, n: int, max_tokens: int) -> None:
    started = provenance(model)
    raw: list[dict[str, Any]] = []
    engine = LlamaCppEngine(gguf_path(model, Path("models")), model, PolicySettings(model=model))
    prompt = Prompt(messages=(Message("user", "Invent a person. Reply in JSON with name, age and hobbies."),))
    constraint = Constraint("json_schema", json.dumps(SCHEMA))
    await engine.generate(prompt, Sampling(n=1, seeds=(1,), max_tokens=4), "warm")
    rates: dict[str, list[float]] = {"free": [], "grammar": [], "mask-always": []}
    for _ in range(rounds):
        for mode in rates:
            lg.CandidateSampler.sample = _mask_always if mode == "mask-always" else _counting_sample  # type: ignore[method-assign]
            lg.CandidateSampler._resample = _counting_resample  # type: ignore[method-assign]
            COUNTS.update(draws=0, masked=0)
            sampling = Sampling(
                n=n,
                seeds=tuple(range(1, n + 1)),
                max_tokens=max_tokens,
                temperature=1.0,
                constraint=None if mode == "free" else constraint,
            )
            start = time.perf_counter()
            gen = await engine.generate(prompt, sampling, mode)
            elapsed = time.perf_counter() - start
            tokens = sum(c.completion_tokens for c in gen.completions)
            rates[mode].append(tokens / elapsed)
            raw.append({"mode": mode, "tokens": tokens, "seconds": elapsed, **COUNTS})
            print(
                f"{mode:12s} {tokens:4d} tokens {elapsed:6.2f} s {tokens / elapsed:6.1f} tok/s "
                f"masked {COUNTS['masked']}/{COUNTS['draws']} draws"
            )
    lg.CandidateSampler.sample, lg.CandidateSampler._resample = _SAMPLE, _RESAMPLE  # type: ignore[method-assign]
    await engine.close()
    free = sum(rates["free"]) / rounds
    for mode in ("grammar", "mask-always"):
        print(f"{mode}: {sum(rates[mode]) / rounds / free:.2f}x the free-text rate")
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    results = {"rounds": rounds, "n": n, "max_tokens": max_tokens, "runs": raw, "tok_s": rates}
    print("raw results:", write_raw("llamacpp_grammar", results, model=model, started=started))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(run(args.model, args.rounds, args.n, args.max_tokens))


if __name__ == "__main__":
    main()
