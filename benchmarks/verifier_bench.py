"""Generative verifier cost: the PRM's two call shapes, and the ORM's concurrent calls against
sequential ones, measured in the same run on the same policy (SmolLM2 on llama.cpp by default).

    .venv/bin/python benchmarks/verifier_bench.py [--candidates 8] [--steps 4] [--rounds 2] [--target HOST:PORT]

Without ``--target`` it starts its own policy service. Compared:
* PRM ``prefix_prompts`` (one Score call per prefix, prefix in the prompt, one-token labels)
  against ``shared_prompt`` (all prefixes of all candidates as continuations of one prompt);
* ORM: the service's concurrent per-candidate calls against the same calls awaited in turn.
Prints wall-clock, policy calls and evaluated tokens, the ratios, and how far the two PRM
shapes' step scores differ (the same probability asked two ways; tokenization and numerics
may move it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation.pools.provenance import provenance, write_raw
from services.common.ports import free_port
from services.verifier.clients import GrpcPolicyScorer
from services.verifier.judge import orm_prompt, problem_text
from services.verifier.orm import OutcomeRewardModel
from services.verifier.prm import ProcessRewardModel
from services.verifier.settings import VerifierSettings
from services.verifier.types import Message, Spend, VerifyJob
from tests.helpers.processes import ServiceProcess, grpc_healthy

PROBLEM = (Message("user", "A shop sells pencils in packs of 6. Ann buys 7 packs and gives away 5 pencils. How many?"),)


def candidates(n: int, steps: int, tag: str = "") -> list[str]:
    """``n`` candidates of ``steps`` steps; a distinct ``tag`` gives texts no earlier call has cached
    (the engine keeps finished prompts for prefix reuse, which would favour whichever variant runs
    second on the same candidates)."""
    out = []
    for i in range(n):
        lines = [
            f"Step {k + 1}: line {k + 1} of attempt {tag}{i}: 7 packs of 6 pencils is {42 + k} pencils so far."
            for k in range(steps - 1)
        ]
        lines.append(f"Step {steps}: so the answer is \\boxed{{{37 + i}}}.")
        out.append("\n".join(lines))
    return out


async def orm_sequential(policy: GrpcPolicyScorer, settings: VerifierSettings, job: VerifyJob) -> Spend:
    spend = Spend()
    for candidate in job.candidates:
        prompt = orm_prompt(problem_text(job.problem), candidate, settings.orm_system_prompt, settings.orm_question)
        result = await policy.score(prompt, [settings.orm_yes, settings.orm_no], model="")
        spend.add(result.spend)
    return spend


T = TypeVar("T")


async def timed(coro: Awaitable[T]) -> tuple[float, T]:
    """Seconds the awaitable took, and its result."""
    start = time.perf_counter()
    result = await coro
    return time.perf_counter() - start, result


def row(name: str, seconds: list[float], spend: Spend) -> str:
    tokens = spend.prompt_tokens + spend.completion_tokens
    return f"{name:<28} {statistics.median(seconds):8.2f} s {spend.policy_calls:6d} calls {tokens:8d} tokens"


async def run(target: str, n: int, steps: int, rounds: int) -> dict[str, object]:
    settings = VerifierSettings()
    policy = GrpcPolicyScorer(target, timeout_s=600, concurrency=16)

    def fresh(verifier: str, tag: str) -> VerifyJob:
        return VerifyJob(verifier=verifier, candidates=tuple(candidates(n, steps, tag)), problem=PROBLEM)

    shared = settings.model_copy(update={"prm_mode": "shared_prompt"})
    serial = GrpcPolicyScorer(target, timeout_s=600, concurrency=1)
    prm, prm_shared = ProcessRewardModel(policy, settings), ProcessRewardModel(policy, shared)
    prm_seq = ProcessRewardModel(serial, settings)
    orm = OutcomeRewardModel(policy, settings)
    await orm.verify(VerifyJob(verifier="orm", candidates=("warm-up",), problem=PROBLEM))
    t: dict[str, list[float]] = {"prefix": [], "prefix_seq": [], "shared": [], "orm": [], "orm_seq": []}
    spends: dict[str, Spend] = {}
    diffs: list[float] = []
    for round_no in range(rounds):
        job = fresh("prm", f"a{round_no}-")  # prefix_prompts and shared_prompt score the same texts
        secs, out = await timed(prm.verify(job))
        t["prefix"].append(secs)
        spends["prefix"] = out.spend
        print(f"  PRM prefix_prompts {secs:.1f} s", file=sys.stderr, flush=True)
        secs, seq_out = await timed(prm_seq.verify(fresh("prm", f"b{round_no}-")))
        t["prefix_seq"].append(secs)
        spends["prefix_seq"] = seq_out.spend
        print(f"  PRM prefix_prompts, one call at a time {secs:.1f} s", file=sys.stderr, flush=True)
        secs, shared_out = await timed(prm_shared.verify(job))
        t["shared"].append(secs)
        spends["shared"] = shared_out.spend
        print(f"  PRM shared_prompt {secs:.1f} s", file=sys.stderr, flush=True)
        diffs += [
            abs(a - b)
            for v, w in zip(out.verdicts, shared_out.verdicts, strict=True)
            for a, b in zip(v.step_scores, w.step_scores, strict=True)
        ]
        secs, out = await timed(orm.verify(fresh("orm", f"c{round_no}-")))
        t["orm"].append(secs)
        spends["orm"] = out.spend
        secs, spends["orm_seq"] = await timed(orm_sequential(policy, settings, fresh("orm", f"d{round_no}-")))
        t["orm_seq"].append(secs)
    await policy.close()
    await serial.close()

    def tok(s: Spend) -> int:
        return s.prompt_tokens + s.completion_tokens

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{n} candidates x {steps} steps, {rounds} rounds (median wall-clock), load average {load}")
    print(row("PRM prefix_prompts, 16 at once", t["prefix"], spends["prefix"]))
    print(row("PRM prefix_prompts, 1 at once", t["prefix_seq"], spends["prefix_seq"]))  # auto on llama.cpp
    print(row("PRM shared_prompt", t["shared"], spends["shared"]))
    print(row("ORM, 16 at once", t["orm"], spends["orm"]))
    print(row("ORM, 1 at once", t["orm_seq"], spends["orm_seq"]))
    med = {k: statistics.median(v) for k, v in t.items()}
    print(f"PRM wall-clock shared_prompt / prefix_prompts: {med['shared'] / med['prefix']:.2f}")
    print(f"PRM wall-clock prefix 1-at-once / concurrent:  {med['prefix_seq'] / med['prefix']:.2f}")
    print(f"PRM tokens shared_prompt / prefix_prompts:     {tok(spends['shared']) / max(1, tok(spends['prefix'])):.2f}")
    print(f"ORM wall-clock concurrent / sequential:        {med['orm'] / med['orm_seq']:.2f}")
    print(f"PRM step-score |prefix_prompts - shared_prompt|: mean {statistics.mean(diffs):.3f}, max {max(diffs):.3f}")
    return {
        "candidates": n,
        "steps": steps,
        "rounds": rounds,
        "wall_s": t,
        "spend": {
            k: {"prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens} for k, s in spends.items()
        },
        "step_score_abs_diffs": diffs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--target", default="")
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()
    started = provenance(None if args.target else args.model)
    service = None
    target = args.target
    if not target:
        port = free_port()
        service = ServiceProcess(
            "policy",
            env={
                "TTC_POLICY_HOST": "127.0.0.1",
                "TTC_POLICY_PORT": str(port),
                "TTC_POLICY_METRICS_PORT": str(free_port()),
                "TTC_POLICY_ENGINE": "llamacpp",
                "TTC_POLICY_MODEL": args.model,
                "TTC_POLICY_N_CTX": "4096",
            },
        ).start()
        target = f"127.0.0.1:{port}"
        service.wait_until(lambda: grpc_healthy(target), 300)
    try:
        results = asyncio.run(run(target, args.candidates, args.steps, args.rounds))
        print("raw results:", write_raw("verifier", results, model=args.model, started=started, argv=sys.argv))
    finally:
        if service is not None:
            service.stop()


if __name__ == "__main__":
    main()
