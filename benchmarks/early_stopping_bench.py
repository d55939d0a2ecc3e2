"""Early-stopping benchmark: fixed-n voting against adaptive early stopping, same samples.

For every problem one pinned request runs the strategy at fixed ``n`` (``early_stop: false``)
through the gateway; its trace gives the candidates in the order they were drawn, with their
vote keys and token counts. Because candidate seeds come from one stream in draw order, an
early-stopping run of the same job draws exactly a prefix of these candidates, so both
outcomes are read off one pool: the fixed-n vote over all of them, and the vote at the point
where :func:`services.search.strategies.stopping.should_stop` (the strategy's own rule)
stops. The script prints accuracy with 95% Wilson intervals, generated tokens, and the token
ratio, measured in the same run, with the load average beside them.

    python benchmarks/early_stopping_bench.py --problems 30 --strategy program_of_thought --n 8

Needs a running stack (``make run``) on the model under test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from evaluation.pools.provenance import provenance, write_raw
from evaluation.problems.datasets import DEVELOPMENT_KEY, Problem, load_mix
from evaluation.stats.intervals import wilson
from services.common.answers import answers_equivalent, normalize_for_vote
from services.search.strategies.stopping import should_stop, wave_sizes


@dataclass(frozen=True)
class Drawn:
    key: str  # "" abstains
    tokens: int


@dataclass(frozen=True)
class Outcome:
    correct: bool
    drawn: int
    tokens: int


def ordered_candidates(trace: dict[str, Any], action: str) -> list[Drawn]:
    """The candidates (``program`` or ``generate`` nodes) in draw order, with their vote keys."""
    out = []
    for node in trace.get("nodes", []):
        if node.get("action") != action:
            continue
        execution = node.get("execution")
        key = str(execution.get("answer") or "") if isinstance(execution, dict) else normalize_for_vote(node["text"])
        out.append(Drawn(key, int(node.get("tokens") or 0)))
    return out


def vote(keys: Sequence[str]) -> str:
    """Majority over answering candidates; ties to the earliest (the strategies' rule)."""
    counts = Counter(k for k in keys if k)
    if not counts:
        return ""
    first = {k: i for i, k in reversed(list(enumerate(keys)))}
    return min(counts, key=lambda k: (-counts[k], first[k]))


def early_stop(pool: Sequence[Drawn], first_wave: int, confidence: float) -> tuple[str, int]:
    """The winner and the number drawn when the strategy's stopping rule is applied to ``pool``."""
    drawn = 0
    for size in wave_sizes(len(pool), first_wave):
        drawn += size
        if drawn >= len(pool):
            break
        votes = Counter(d.key for d in pool[:drawn] if d.key)
        if should_stop(votes, float(len(pool) - drawn), confidence).stop:
            break
    return vote([d.key for d in pool[:drawn]]), drawn


def correct(key: str, problem: Problem) -> bool:
    return bool(key) and answers_equivalent(key, problem.reference)


async def measure(args: argparse.Namespace, problem: Problem, http: httpx.AsyncClient) -> tuple[Outcome, Outcome]:
    params: dict[str, Any] = {"early_stop": False}
    if args.strategy == "program_of_thought":
        params["mode"] = "program"
    body = {
        "model": args.model,
        "messages": problem.messages(),
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "ttc": {"strategy": args.strategy, "n": args.n, "params": params},
    }
    reply = (await http.post("/v1/chat/completions", json=body)).raise_for_status().json()
    trace = (await http.get(f"/v1/traces/{reply['ttc']['trace_id']}")).raise_for_status().json()
    pool = ordered_candidates(trace, "program" if args.strategy == "program_of_thought" else "generate")
    fixed_key = vote([d.key for d in pool])
    early_key, drawn = early_stop(pool, args.first_wave, args.confidence)
    fixed = Outcome(correct(fixed_key, problem), len(pool), sum(d.tokens for d in pool))
    early = Outcome(correct(early_key, problem), drawn, sum(d.tokens for d in pool[:drawn]))
    return fixed, early


def summary(name: str, outcomes: Sequence[Outcome]) -> dict[str, Any]:
    right = sum(o.correct for o in outcomes)
    low, high = wilson(right, len(outcomes))
    return {
        "config": name,
        "accuracy": right / len(outcomes),
        "ci95": [round(low, 3), round(high, 3)],
        "mean_candidates": sum(o.drawn for o in outcomes) / len(outcomes),
        "mean_generated_tokens": sum(o.tokens for o in outcomes) / len(outcomes),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    datasets = [d for d in args.datasets.split(",") if d]
    per_set = max(1, math.ceil(args.problems / (3 * len(datasets))))
    problems = load_mix(datasets, per_set, split=DEVELOPMENT_KEY, seed=args.seed)[: args.problems]
    load_before = os.getloadavg()
    fixed, early = [], []
    async with httpx.AsyncClient(base_url=args.base_url, timeout=args.timeout) as http:
        for i, problem in enumerate(problems):
            f, e = await measure(args, problem, http)
            fixed.append(f)
            early.append(e)
            print(f"[{i + 1}/{len(problems)}] {problem.id}: fixed {f} early {e}", file=sys.stderr, flush=True)
    result = {
        "model": args.model,
        "strategy": args.strategy,
        "n": args.n,
        "first_wave": args.first_wave,
        "confidence": args.confidence,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "problems": len(problems),
        "fixed": summary(f"{args.strategy} n={args.n} fixed", fixed),
        "early_stop": summary(f"{args.strategy} n={args.n} early stop", early),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    f_tok, e_tok = result["fixed"]["mean_generated_tokens"], result["early_stop"]["mean_generated_tokens"]
    result["token_ratio_early_over_fixed"] = round(e_tok / f_tok, 3) if f_tok else None
    result["tokens_saved_pct"] = round(100 * (1 - e_tok / f_tok), 1) if f_tok else None
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--strategy", choices=("program_of_thought", "self_consistency"), default="program_of_thought")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--first-wave", type=int, default=3)
    p.add_argument("--confidence", type=float, default=0.9)
    p.add_argument("--problems", type=int, default=30)
    p.add_argument("--datasets", default="chain_sum,basic_arithmetic,products,leg_counting,gsm_symbolic")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", default="", help="also write the result here")
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    started = provenance(args.model)
    result = asyncio.run(main_async(args))
    result["git_describe"], result["model_sha256"] = started["git_describe"], started["model_sha256"]
    print(json.dumps(result, indent=2))
    print("raw results:", write_raw("early_stopping", result, model=args.model, started=started, argv=sys.argv))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
