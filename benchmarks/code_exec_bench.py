"""Code chosen by running it, on HumanEval's held-out half: greedy against n candidates
clustered by behaviour (AlphaCode) and ranked by generated tests (CodeT's dual agreement).

    .venv/bin/python benchmarks/code_exec_bench.py --chunk 10      # resumable: 10 more problems
    .venv/bin/python benchmarks/code_exec_bench.py --summary-only  # rebuild the summary

Per problem it runs the ``code_execution`` strategy once through the production seam
(``run_search``) against the real policy service (Qwen2.5-Coder-0.5B on llama.cpp) and the real
sandbox service, both started here on free ports: n candidates (the first greedy), one call
that writes test cases, every candidate run on the parsed inputs. From that one pool, read
back from the trace, three answers are scored:

- **greedy**: the first candidate (temperature 0), what one plain request returns;
- **clusters**: the strategy's own answer (largest behaviour cluster, ties by assertions passed,
  then the shortest candidate);
- **dual agreement**: CodeT's consensus sets over the same runs (``code_behaviour.dual_agreement``).

HumanEval's hidden tests are used only to score: every candidate is checked once in the
sandbox (``evaluation/checkers.check_code``), which also gives the pool's oracle
coverage. The problems are ``datasets.load_problems("humaneval", split="heldout")``, the
salted-hash split calibration uses. Records are appended to ``records.jsonl`` one problem at a
time (a rerun skips the problems already there); ``summary.json`` holds pass@1 with Wilson 95%
intervals, a paired bootstrap interval of each selector's gain over greedy, tokens and sandbox
seconds per problem, the load average and ``git describe --dirty``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from google.protobuf import json_format, struct_pb2

from evaluation.problems.checkers import check_code, sandbox_runner
from evaluation.problems.datasets import Problem, load_problems
from evaluation.stats.intervals import wilson
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.search.interfaces import Verification, VerifyCall
from services.search.strategies.code_behaviour import (
    Behaviour,
    Entry,
    candidate_source,
    dual_agreement,
)
from services.search.strategies.code_harness import parse_run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs/data/code_exec"
METHODS = ("greedy", "clusters", "dual_agreement")


class NoVerifier:
    """The strategy runs without a verifier here; a call would be a bug in the benchmark."""

    async def verify(self, call: VerifyCall) -> Verification:
        raise RuntimeError(f"unexpected verifier call ({call.verifier})")


def git_describe() -> str:
    return subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def make_job(problem: Problem, args: argparse.Namespace, index: int) -> orchestrator_pb2.SearchJob:
    params = struct_pb2.Struct()
    params.update({"tests": args.tests})
    return orchestrator_pb2.SearchJob(
        job_id=f"code-exec-{index}",
        model=args.model,
        messages=[common_pb2.ChatMessage(role=m["role"], content=m["content"]) for m in problem.messages()],
        strategy=orchestrator_pb2.StrategySpec(name="code_execution", n=args.n, params=params),
        budget=orchestrator_pb2.Budget(max_generated_tokens=args.n * args.max_tokens + 1024),
        temperature=args.temperature,
        top_p=1.0,
        max_tokens=args.max_tokens,
        seed=1000 + index,
    )


def pool_from_trace(trace: orchestrator_pb2.SearchTrace) -> tuple[list[orchestrator_pb2.TraceNode], list[Entry], int]:
    """The candidates in draw order, their ranking entries (from the runs the trace recorded)
    and the number of inputs, exactly as the strategy saw them."""
    root = trace.nodes[0].id
    candidates = [n for n in trace.nodes if n.parent_id == root and n.action == "generate"]
    inputs = next((n for n in trace.nodes if n.action == "inputs"), None)
    count = inputs.visits if inputs is not None else 0
    entries: list[Entry] = []
    for index, node in enumerate(candidates):
        source = candidate_source(node.text)
        if source is None:
            continue
        if node.HasField("execution"):
            behaviour = parse_run(node.execution.stdout, count)
        elif count == 0:
            behaviour = Behaviour((), ())
        else:  # no function to call: it abstained without a run
            continue
        entries.append(Entry(index, len(source), behaviour))
    return candidates, entries, count


async def measure(problem: Problem, args: argparse.Namespace, index: int, targets: dict[str, str]) -> dict[str, Any]:
    from services.common.grpc_client import insecure_channel
    from services.orchestrator.clients import GrpcExecutor, GrpcPolicy
    from services.search.run import run_search

    job = make_job(problem, args, index)
    started = time.perf_counter()
    async with insecure_channel(targets["policy"]) as pch, insecure_channel(targets["sandbox"]) as sch:
        result, trace = await run_search(
            job, GrpcPolicy(pch, args.model, timeout=900.0), NoVerifier(), executor=GrpcExecutor(sch)
        )
    wall = time.perf_counter() - started
    candidates, entries, inputs = pool_from_trace(trace)
    if not candidates:
        raise RuntimeError(f"{problem.id}: no candidates ({result.termination}: {result.error})")
    chosen = next((i for i, n in enumerate(candidates) if n.chosen), 0)
    dual = dual_agreement(entries)
    picks = {"greedy": 0, "clusters": chosen, "dual_agreement": dual[0].best.index if dual else 0}
    runner = sandbox_runner(targets["sandbox"])
    verdicts = [await check_code(problem, node.text, runner) for node in candidates]
    if any(v.correct is None for v in verdicts):
        raise RuntimeError(f"{problem.id}: sandbox could not score: {[v.error for v in verdicts if v.error]}")
    correct = [bool(v.correct) for v in verdicts]
    tests_node = next((n for n in trace.nodes if n.action == "tests"), None)
    used = result.budget_used
    return {
        "id": problem.id,
        "task_id": problem.id.split("/", 2)[2],
        "termination": orchestrator_pb2.Termination.Name(result.termination),
        "candidates": len(candidates),
        "inputs": inputs,
        "assertions": sum(p is not None for p in entries[0].behaviour.passed) if entries else 0,
        "runnable": len(entries),
        "clusters": sum(1 for n in trace.nodes if n.action == "cluster"),
        "candidate_correct": correct,
        "candidate_tokens": [n.tokens for n in candidates],
        "picks": picks,
        "correct": {m: correct[i] for m, i in picks.items()},
        "tokens": {
            "greedy": candidates[0].tokens,
            "clusters": used.generated_tokens,
            "dual_agreement": used.generated_tokens,
        },
        "tests_tokens": tests_node.tokens if tests_node is not None else 0,
        "sandbox_runs": used.sandbox_runs,
        "sandbox_seconds": {"greedy": 0.0, "clusters": used.sandbox_seconds, "dual_agreement": used.sandbox_seconds},
        "wall_seconds": round(wall, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "git": GIT_DESCRIBE,
        "budget_used": json_format.MessageToDict(used),
    }


GIT_DESCRIBE = git_describe()


def paired_bootstrap(gains: Sequence[int], rounds: int = 10_000, seed: int = 0) -> list[float]:
    """95% interval of the mean per-problem gain (selector minus greedy), problems resampled."""
    if not gains:
        return [0.0, 0.0]
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(gains, k=len(gains))) / len(gains) for _ in range(rounds))
    return [round(means[int(0.025 * rounds)], 4), round(means[int(0.975 * rounds) - 1], 4)]


def summarize(records: Sequence[dict[str, Any]], args: argparse.Namespace, heldout: int) -> dict[str, Any]:
    n = len(records)
    methods: dict[str, Any] = {}
    for method in METHODS:
        right = sum(r["correct"][method] for r in records)
        gains = [int(r["correct"][method]) - int(r["correct"]["greedy"]) for r in records]
        methods[method] = {
            "pass_at_1": round(right / n, 4) if n else 0.0,
            "correct": right,
            "ci95_wilson": [round(x, 4) for x in wilson(right, n)],
            "gain_over_greedy": round(sum(gains) / n, 4) if n else 0.0,
            "gain_ci95_paired_bootstrap": paired_bootstrap(gains),
            "wins_losses_vs_greedy": [gains.count(1), gains.count(-1)],
            "tokens_per_problem": round(sum(r["tokens"][method] for r in records) / n, 1) if n else 0.0,
            "sandbox_seconds_per_problem": round(sum(r["sandbox_seconds"][method] for r in records) / n, 3)
            if n
            else 0.0,
        }
    pool = sum(sum(r["candidate_correct"]) / r["candidates"] for r in records)
    oracle = sum(any(r["candidate_correct"]) for r in records)
    greedy = methods["greedy"]["pass_at_1"]
    return {
        "benchmark": "code_exec_bench",
        "git": git_describe(),
        "records_git": sorted({r.get("git", "b237f96-dirty") for r in records}),
        "model": args.model,
        "data": "HumanEval held-out half (evaluation.problems.datasets.split_of, salt ttc-serve/split/v1)",
        "heldout_problems": heldout,
        "problems_done": n,
        "n": args.n,
        "tests_asked": args.tests,
        "temperature": args.temperature,
        "max_tokens": args.max_tokens,
        "methods": methods,
        "ratio_clusters_over_greedy": round(methods["clusters"]["pass_at_1"] / greedy, 3) if greedy else None,
        "ratio_dual_over_greedy": round(methods["dual_agreement"]["pass_at_1"] / greedy, 3) if greedy else None,
        "pool_mean_pass_at_1": round(pool / n, 4) if n else 0.0,
        "oracle_any_correct": round(oracle / n, 4) if n else 0.0,
        "mean_inputs": round(sum(r["inputs"] for r in records) / n, 2) if n else 0.0,
        "problems_without_inputs": sum(1 for r in records if r["inputs"] == 0),
        "mean_wall_seconds": round(sum(r["wall_seconds"] for r in records) / n, 1) if n else 0.0,
        "load_average_now": [round(x, 2) for x in os.getloadavg()],
    }


def read_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def run_chunk(args: argparse.Namespace, todo: list[tuple[int, Problem]], records_path: Path) -> None:
    from services.common.ports import free_port
    from tests.helpers.processes import grpc_healthy, start_policy, start_sandbox

    sandbox = start_sandbox(95000 + (os.getpid() % 200) * 64, args.sandbox_slots)
    port = free_port()
    policy = start_policy(args.model, port, TTC_POLICY_N_CTX=str(args.n_ctx))
    try:
        policy.wait_until(lambda: grpc_healthy(f"127.0.0.1:{port}"), 600)
        targets = {"policy": f"127.0.0.1:{port}", "sandbox": sandbox.target}
        for index, problem in todo:
            record = await measure(problem, args, index, targets)
            with records_path.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(
                f"{problem.id}: greedy {record['correct']['greedy']} clusters {record['correct']['clusters']} "
                f"dual {record['correct']['dual_agreement']} oracle {any(record['candidate_correct'])} "
                f"({record['wall_seconds']}s)",
                flush=True,
            )
    finally:
        policy.stop()
        sandbox.process.stop()


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-coder-0.5b")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--tests", type=int, default=8, help="test cases the model is asked to write")
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--max-tokens", type=int, default=512)
    p.add_argument("--n-ctx", type=int, default=2048, help="policy context per sequence")
    p.add_argument("--sandbox-slots", type=int, default=2)
    p.add_argument("--chunk", type=int, default=10, help="problems to add in this run (0: all left)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--summary-only", action="store_true")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    records_path = args.out / "records.jsonl"
    problems = load_problems("humaneval", 1000, split="heldout")
    problems.sort(key=lambda pr: int(pr.id.rsplit("/", 1)[1]))
    done = {r["id"] for r in read_records(records_path)}
    todo = [(i, pr) for i, pr in enumerate(problems) if pr.id not in done]
    if args.chunk:
        todo = todo[: args.chunk]
    if todo and not args.summary_only:
        asyncio.run(run_chunk(args, todo, records_path))
    records = read_records(records_path)
    summary = summarize(records, args, len(problems))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
