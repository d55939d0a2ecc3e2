"""Prefix-affinity routing against round robin: two policy replicas, beam search jobs.

Two real policy services (llama.cpp, SmolLM2 by default) run as separate processes. The same
kind of workload runs twice, concurrently within each side: ``--jobs`` beam-search jobs, each
re-sending its question and the steps kept so far on every policy call.

- **round robin**: one gRPC channel with the ``round_robin`` policy over both replicas (what a
  headless Service gave before), so a job's calls alternate between replicas;
- **affinity**: ``services/common/replicas.py``: every call of a job goes to the replica its
  job id hashes to.

Reported per side: the prefix-cache hit rate read from the engines' own counters (``GetStats``
``prefix_cache_hits / prefix_cache_queries``, deltas summed over both replicas), and the wall
time. Each side uses its own questions, so neither inherits the other's cached prompts. The
verifier is a stand-in that scores steps by length (this measures the policy's cache, not
judging); the policy calls are the real ones.

    python benchmarks/affinity_bench.py [--model smollm2-135m] [--jobs 6] [--steps 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from google.protobuf import struct_pb2  # noqa: E402

from evaluation.pools.provenance import provenance, write_raw  # noqa: E402
from services.common.grpc_client import insecure_channel  # noqa: E402
from services.common.ports import free_port  # noqa: E402
from services.common.replicas import ReplicaRouter  # noqa: E402
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2, policy_pb2, policy_pb2_grpc  # noqa: E402
from services.orchestrator.clients import GrpcPolicy  # noqa: E402
from services.search.interfaces import Verdict, Verification, VerifyCall  # noqa: E402
from services.search.run import run_search  # noqa: E402
from tests.helpers.processes import ServiceProcess, grpc_healthy  # noqa: E402

QUESTIONS = [
    "A farmer has 17 sheep and buys 25 more, then sells 9. How many sheep are left?",
    "A train travels 60 km per hour for 3 hours and then 40 km per hour for 2 hours. How far did it go?",
    "Tom has 3 boxes of 12 pencils and gives away 7 pencils. How many pencils does he have?",
    "A shop sells apples at 4 for 2 dollars. How much do 18 apples cost?",
    "Sara reads 25 pages a day. How many days does she need for a 310-page book?",
    "A rectangle is 7 cm wide and 12 cm long. What is its perimeter and its area?",
    "A tank holds 500 litres and leaks 12 litres an hour. How much is left after 15 hours?",
    "There are 48 students in 6 equal groups; 2 students leave each group. How many remain?",
    "A bike costs 240 dollars with a 15 percent discount. What is the price after the discount?",
    "Mia saves 35 dollars a week. How many weeks until she has 420 dollars?",
    "A recipe needs 3 eggs for 8 pancakes. How many eggs for 40 pancakes?",
    "A car uses 6 litres per 100 km. How much fuel does a 350 km trip need?",
]


class LengthVerifier:
    """A stand-in PRM: each candidate's steps score by their length (no model involved)."""

    async def verify(self, call: VerifyCall) -> Verification:
        verdicts = []
        for text in call.candidates:
            steps = [s for s in text.split("\n\n") if s.strip()] or [text]
            scores = tuple(min(1.0, len(s) / 200) for s in steps)
            verdicts.append(Verdict(score=scores[-1], step_scores=scores))
        return Verification(verdicts=tuple(verdicts))


def beam_job(job_id: str, question: str, steps: int) -> orchestrator_pb2.SearchJob:
    params = struct_pb2.Struct()
    params.update({"beam_width": 2, "expansion": 2, "max_steps": steps, "step_max_tokens": 48})
    return orchestrator_pb2.SearchJob(
        job_id=job_id,
        messages=[common_pb2.ChatMessage(role="user", content=question)],
        strategy=orchestrator_pb2.StrategySpec(name="beam_search", verifier="prm", params=params),
        budget=orchestrator_pb2.Budget(max_generated_tokens=20_000),
        temperature=0.7,
        max_tokens=256,
        seed=7,
    )


def stats(targets: list[str]) -> tuple[int, int]:
    import grpc

    hits = queries = 0
    for target in targets:
        with grpc.insecure_channel(target) as channel:
            s = policy_pb2_grpc.PolicyStub(channel).GetStats(policy_pb2.StatsRequest(), timeout=10)
        hits += s.prefix_cache_hits
        queries += s.prefix_cache_queries
    return hits, queries


async def run_side(side: str, targets: list[str], questions: list[str], steps: int) -> dict[str, float]:
    verifier = LengthVerifier()
    router = ReplicaRouter("replicas:0", insecure_channel, replicas=targets)
    shared = insecure_channel("ipv4:" + ",".join(targets))  # round_robin over both replicas
    hits0, queries0 = stats(targets)
    start = time.perf_counter()

    async def one(i: int, question: str) -> None:
        job = beam_job(f"{side}-{i}", question, steps)
        route = await router.channels(job.job_id) if side == "affinity" else shared
        await run_search(job, GrpcPolicy(route, timeout=900), verifier)

    await asyncio.gather(*(one(i, q) for i, q in enumerate(questions)))
    wall = time.perf_counter() - start
    hits1, queries1 = stats(targets)
    await router.close()
    await shared.close()
    hits, queries = hits1 - hits0, queries1 - queries0
    return {"hit_rate": hits / queries if queries else 0.0, "hits": hits, "queries": queries, "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    started = provenance(args.model)
    ports = [free_port(), free_port()]
    procs = [
        ServiceProcess(
            "policy",
            env={
                "TTC_POLICY_HOST": "127.0.0.1",
                "TTC_POLICY_PORT": str(port),
                "TTC_POLICY_METRICS_PORT": str(free_port()),
                "TTC_POLICY_MODEL": args.model,
                "TTC_POLICY_N_THREADS": "1",  # two replicas share the machine's cores
            },
        ).start()
        for port in ports
    ]
    targets = [f"127.0.0.1:{p}" for p in ports]
    try:
        for proc, target in zip(procs, targets, strict=True):
            proc.wait_until(lambda t=target: grpc_healthy(t), timeout=300)  # type: ignore[misc]
        load_before = os.getloadavg()[0]
        n = args.jobs
        results = {
            "round_robin": asyncio.run(run_side("round_robin", targets, QUESTIONS[:n], args.steps)),
            "affinity": asyncio.run(run_side("affinity", targets, QUESTIONS[n : 2 * n], args.steps)),
        }
        load_after = os.getloadavg()[0]
    finally:
        for proc in procs:
            proc.stop()
    for side, r in results.items():
        print(
            f"{side:12s} prefix-cache hit rate {r['hit_rate']:.1%} ({r['hits']:.0f}/{r['queries']:.0f} prompt tokens) "
            f"wall {r['wall_s']:.1f} s"
        )
    rr, aff = results["round_robin"]["hit_rate"], results["affinity"]["hit_rate"]
    print(f"affinity / round robin hit rate: {aff / rr if rr else float('inf'):.2f}x")
    print(f"load average (1 min) before {load_before:.2f}, after {load_after:.2f}; cores {os.cpu_count()}")
    raw = {"args": vars(args), "sides": results}
    print("raw results:", write_raw("affinity", raw, model=args.model, started=started, argv=sys.argv))


if __name__ == "__main__":
    main()
