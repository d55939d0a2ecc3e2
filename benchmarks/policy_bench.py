"""Policy benchmark on llama.cpp: shared-prompt n candidates, and the gRPC service's overhead.

Two ratios, each against a baseline measured in the same run on the same engine settings:

1. ``n`` candidates in ONE engine call vs ``n`` separate calls of one candidate each (same seeds,
   so the same candidates are generated both ways): generated tokens/s, target >= 1.5x.
2. The policy service over gRPC (a real ``ttc serve policy`` process) vs calling the engine
   in-process, ``n`` candidates of ``max_tokens`` each with the same seeds: wall-time overhead,
   target < 5%.

Runs alternate between the compared sides and report medians, so a machine whose load drifts
during the run biases neither side.

    python benchmarks/policy_bench.py [--model smollm2-135m] [--n 8] [--max-tokens 128] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.pools.provenance import provenance, write_raw  # noqa: E402
from services.common.ports import free_port  # noqa: E402
from services.gen.ttc.v1 import common_pb2, policy_pb2, policy_pb2_grpc  # noqa: E402
from services.policy.engines import create_engine  # noqa: E402
from services.policy.engines.base import Engine, Message, Prompt, Sampling  # noqa: E402
from services.policy.settings import PolicySettings  # noqa: E402

QUESTION = "A shop sells pencils at 3 for 25 cents. How much do 18 pencils cost? Explain step by step."


@dataclass
class Run:
    seconds: float
    tokens: int

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds


async def engine_call(
    engine: Engine, prompt: Prompt, seeds: list[int], args: argparse.Namespace
) -> tuple[Run, list[str]]:
    sampling = Sampling(n=len(seeds), seeds=tuple(seeds), max_tokens=args.max_tokens, temperature=args.temperature)
    start = time.perf_counter()
    gen = await engine.generate(prompt, sampling, "bench")
    elapsed = time.perf_counter() - start
    return Run(elapsed, sum(c.completion_tokens for c in gen.completions)), [c.text for c in gen.completions]


async def separate_calls(
    engine: Engine, prompt: Prompt, seeds: list[int], args: argparse.Namespace
) -> tuple[Run, list[str]]:
    total, texts = Run(0.0, 0), []
    for seed in seeds:
        run, text = await engine_call(engine, prompt, [seed], args)
        total = Run(total.seconds + run.seconds, total.tokens + run.tokens)
        texts += text
    return total, texts


async def grpc_call(
    stub: policy_pb2_grpc.PolicyStub, seeds: list[int], args: argparse.Namespace
) -> tuple[Run, list[str]]:
    request = policy_pb2.GenerateRequest(
        input=policy_pb2.PromptInput(messages=[common_pb2.ChatMessage(role="user", content=QUESTION)]),
        sampling=policy_pb2.SamplingParams(
            n=len(seeds), seeds=seeds, max_tokens=args.max_tokens, temperature=args.temperature
        ),
    )
    start = time.perf_counter()
    reply = await stub.Generate(request, timeout=3600)
    elapsed = time.perf_counter() - start
    return Run(elapsed, reply.usage.completion_tokens), [c.text for c in reply.candidates]


def start_service(args: argparse.Namespace, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    log = Path(tempfile.mkstemp(prefix="policy-bench-", suffix=".log")[1])
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TTC_LOG_JSON": "false",
        "TTC_POLICY_HOST": "127.0.0.1",
        "TTC_POLICY_PORT": str(port),
        "TTC_POLICY_METRICS_PORT": str(free_port()),
        "TTC_POLICY_MODEL": args.model,
        "TTC_POLICY_N_THREADS": str(args.threads),
        "TTC_POLICY_MODELS_DIR": args.models_dir,
    }
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "serve", "policy"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return proc, log


async def wait_ready(stub: policy_pb2_grpc.PolicyStub, proc: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(900):
        if proc.poll() is not None:
            raise RuntimeError(f"policy service exited:\n{log.read_text()[-4000:]}")
        try:
            await stub.ListModels(policy_pb2.ListModelsRequest(), timeout=1)
            return
        except grpc.aio.AioRpcError:
            await asyncio.sleep(0.2)
    raise TimeoutError(f"policy service not ready:\n{log.read_text()[-4000:]}")


def median_run(runs: list[Run]) -> Run:
    return Run(statistics.median(r.seconds for r in runs), int(statistics.median(r.tokens for r in runs)))


async def main(args: argparse.Namespace) -> dict[str, object]:
    settings = PolicySettings(model=args.model, n_threads=args.threads, models_dir=args.models_dir)
    engine = await create_engine(settings)
    prompt = Prompt(messages=(Message("user", QUESTION),))
    seeds = [1000 + i for i in range(args.n)]
    await engine_call(engine, prompt, [1], argparse.Namespace(max_tokens=8, temperature=args.temperature))  # warm-up

    batched: list[Run] = []
    separate: list[Run] = []
    for _ in range(args.repeats):
        run, texts_batched = await engine_call(engine, prompt, seeds, args)
        batched.append(run)
        run, texts_separate = await separate_calls(engine, prompt, seeds, args)
        separate.append(run)
    same_texts = sum(a == b for a, b in zip(texts_batched, texts_separate, strict=True))

    port = free_port()
    proc, log = start_service(args, port)
    inproc: list[Run] = []
    over_grpc: list[Run] = []
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = policy_pb2_grpc.PolicyStub(channel)
            await wait_ready(stub, proc, log)
            await grpc_call(stub, [1], argparse.Namespace(max_tokens=8, temperature=args.temperature))  # warm-up
            for _ in range(args.repeats):
                run, texts_local = await engine_call(engine, prompt, seeds, args)
                inproc.append(run)
                run, texts_remote = await grpc_call(stub, seeds, args)
                over_grpc.append(run)
    finally:
        proc.terminate()
        proc.wait(30)
    await engine.close()

    same_remote = sum(a == b for a, b in zip(texts_local, texts_remote, strict=True))
    b, s, i, g = median_run(batched), median_run(separate), median_run(inproc), median_run(over_grpc)
    overhead = (g.seconds / g.tokens) / (i.seconds / i.tokens) - 1.0  # per generated token, in case counts differ
    return {
        "model": args.model,
        "n": args.n,
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "threads": args.threads or len(os.sched_getaffinity(0)),
        "repeats": args.repeats,
        "batched_tok_s": round(b.tps, 1),
        "separate_tok_s": round(s.tps, 1),
        "batched_vs_separate": round(b.tps / s.tps, 2),
        "batched_tokens": b.tokens,
        "separate_tokens": s.tokens,
        "identical_candidates_batched_vs_separate": f"{same_texts}/{args.n}",
        "inproc_s": round(i.seconds, 2),
        "grpc_s": round(g.seconds, 2),
        "inproc_tokens": i.tokens,
        "grpc_tokens": g.tokens,
        "identical_candidates_grpc_vs_inproc": f"{same_remote}/{args.n}",
        "grpc_overhead_pct": round(100 * overhead, 2),
        "all_runs_s": {
            "batched": [round(r.seconds, 2) for r in batched],
            "separate": [round(r.seconds, 2) for r in separate],
            "inproc": [round(r.seconds, 2) for r in inproc],
            "grpc": [round(r.seconds, 2) for r in over_grpc],
        },
    }


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--models-dir", default="models")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads; 0 = all cores")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    args = parser.parse_args()
    started = provenance(args.model)
    result = asyncio.run(main(args))
    path = write_raw("policy_bench", {"args": vars(args), **result}, model=args.model, started=started, argv=sys.argv)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:45s} {value}")
    print(
        f"\nRATIO n={args.n} in one call vs {args.n} separate calls: {result['batched_vs_separate']}x "
        f"(target >= 1.5x)\nRATIO gRPC service vs in-process engine: {result['grpc_overhead_pct']}% overhead "
        f"(target < 5%)"
    )
    print(f"raw results: {path}")


if __name__ == "__main__":
    cli()
