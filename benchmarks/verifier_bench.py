"""Generative verifier cost: the service's batched PRM and concurrent ORM against naive baselines,
measured in the same run on the same policy (SmolLM2 on llama.cpp by default).

    .venv/bin/python benchmarks/verifier_bench.py [--candidates 8] [--steps 4] [--rounds 2] [--target HOST:PORT]

Without ``--target`` it starts its own policy service. Baselines:
* PRM per-prefix: one Score call per prefix, the prefix inside the prompt, continuations
  " Yes"/" No" (the obvious implementation; Σ steps calls).
* ORM sequential: the same per-candidate calls the service makes, awaited one after another.
Prints wall-clock, policy calls and evaluated tokens, and the ratios service / baseline, and
how far the two PRM formulations' step scores differ (they are different prompts, so they
need not agree; the number says how much).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.verifier.clients import GrpcPolicyScorer
from services.verifier.judge import orm_prompt, prm_header, problem_text, yes_probability
from services.verifier.orm import OutcomeRewardModel
from services.verifier.prm import ProcessRewardModel, split_steps
from services.verifier.settings import VerifierSettings
from services.verifier.types import JudgePrompt, Message, Spend, VerifyJob
from tests.helpers.processes import ServiceProcess, free_port, grpc_healthy

PROBLEM = (Message("user", "A shop sells pencils in packs of 6. Ann buys 7 packs and gives away 5 pencils. How many?"),)


def candidates(n: int, steps: int) -> list[str]:
    out = []
    for i in range(n):
        lines = [
            f"Step {k + 1}: line {k + 1} of attempt {i}: 7 packs of 6 pencils is {42 + k} pencils so far."
            for k in range(steps - 1)
        ]
        lines.append(f"Step {steps}: so the answer is \\boxed{{{37 + i}}}.")
        out.append("\n".join(lines))
    return out


async def prm_per_prefix(
    policy: GrpcPolicyScorer, settings: VerifierSettings, job: VerifyJob
) -> tuple[list[list[float]], Spend]:
    spend = Spend()
    header = prm_header(problem_text(job.problem)).text
    scores = []
    for candidate in job.candidates:
        steps = split_steps(candidate, settings.prm_max_steps)
        row = []
        for k in range(1, len(steps) + 1):
            prompt = JudgePrompt(text=header + "\n\n".join(steps[:k]) + "\n\n" + settings.prm_question)
            result = await policy.score(prompt, [settings.prm_yes, settings.prm_no], model="")
            spend.add(result.spend)
            row.append(yes_probability(result.totals[0], result.totals[1]))
        scores.append(row)
    return scores, spend


async def orm_sequential(policy: GrpcPolicyScorer, settings: VerifierSettings, job: VerifyJob) -> Spend:
    spend = Spend()
    for candidate in job.candidates:
        prompt = orm_prompt(problem_text(job.problem), candidate, settings.orm_system_prompt, settings.orm_question)
        result = await policy.score(prompt, [settings.orm_yes, settings.orm_no], model="")
        spend.add(result.spend)
    return spend


async def timed(coro):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = await coro
    return time.perf_counter() - start, result


def row(name: str, seconds: list[float], spend: Spend) -> str:
    tokens = spend.prompt_tokens + spend.completion_tokens
    return f"{name:<28} {statistics.median(seconds):8.2f} s {spend.policy_calls:6d} calls {tokens:8d} tokens"


async def run(target: str, n: int, steps: int, rounds: int) -> None:
    settings = VerifierSettings()
    policy = GrpcPolicyScorer(target, timeout_s=600)
    job = VerifyJob(verifier="prm", candidates=tuple(candidates(n, steps)), problem=PROBLEM)
    prm, orm = ProcessRewardModel(policy, settings), OutcomeRewardModel(policy, settings)
    await orm.verify(VerifyJob(verifier="orm", candidates=("warm-up",), problem=PROBLEM))
    t = {"prm": [], "prm_naive": [], "orm": [], "orm_seq": []}  # type: dict[str, list[float]]
    spends: dict[str, Spend] = {}
    diffs: list[float] = []
    for _ in range(rounds):
        secs, out = await timed(prm.verify(job))
        t["prm"].append(secs)
        spends["prm"] = out.spend
        secs, (naive_scores, spends["prm_naive"]) = await timed(prm_per_prefix(policy, settings, job))
        t["prm_naive"].append(secs)
        diffs += [
            abs(a - b)
            for v, row_ in zip(out.verdicts, naive_scores, strict=True)
            for a, b in zip(v.step_scores, row_, strict=True)
        ]
        secs, out = await timed(orm.verify(VerifyJob(verifier="orm", candidates=job.candidates, problem=PROBLEM)))
        t["orm"].append(secs)
        spends["orm"] = out.spend
        secs, spends["orm_seq"] = await timed(orm_sequential(policy, settings, job))
        t["orm_seq"].append(secs)
    await policy.close()
    print(f"{n} candidates x {steps} steps, {rounds} rounds (median wall-clock)")
    print(row("PRM batched (service)", t["prm"], spends["prm"]))
    print(row("PRM per-prefix (baseline)", t["prm_naive"], spends["prm_naive"]))
    print(row("ORM concurrent (service)", t["orm"], spends["orm"]))
    print(row("ORM sequential (baseline)", t["orm_seq"], spends["orm_seq"]))
    print(
        f"PRM wall-clock ratio service/baseline: {statistics.median(t['prm']) / statistics.median(t['prm_naive']):.2f}"
    )
    tok = lambda s: s.prompt_tokens + s.completion_tokens  # noqa: E731
    print(f"PRM token ratio service/baseline:      {tok(spends['prm']) / max(1, tok(spends['prm_naive'])):.2f}")
    print(f"ORM wall-clock ratio service/baseline: {statistics.median(t['orm']) / statistics.median(t['orm_seq']):.2f}")
    print(f"PRM step-score |batched - per-prefix|: mean {statistics.mean(diffs):.3f}, max {max(diffs):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--target", default="")
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()
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
        asyncio.run(run(target, args.candidates, args.steps, args.rounds))
    finally:
        if service is not None:
            service.stop()


if __name__ == "__main__":
    main()
