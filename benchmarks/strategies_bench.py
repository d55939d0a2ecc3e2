"""Strategy benchmark: what each test-time strategy buys, and at what cost (not a CI test).

Runs every chosen strategy through the production seam (``services.search.run.run_search``)
on seeded reasoning-gym problems, with the real model, and prints per strategy:

- pool metrics over the strategy's own independent samples (parallel strategies only):
  pass@1, unbiased pass@k, maj@k and coverage (oracle: a right answer exists in the pool);
- **selected accuracy**: the answer the strategy actually returned, checked by the data
  set's own reasoning-gym answer checker (``score_answer``) on the extracted answer;
- generated tokens, verifier tokens and wall-clock per problem;
- accuracy per 1,000 generated tokens, relative to best-of-N with the same token budget
  (every strategy gets the same ``--budget``), and a note wherever a strategy is worse than
  best-of-N at that budget.

Engines: ``--engine llamacpp`` loads the GGUF in-process (the policy service's own
llama.cpp engine) and verifies with the verifier service's own ORM/PRM classes over that
engine; ``--engine grpc`` talks to running policy and verifier services.

A deterministic engine gives the same candidates for the same seeds, so strategies that
sample the same n seeds (self-consistency, best-of-N, weighted vote, single) share one
generation through a cache; a cache hit is charged the seconds and tokens the original call
took, so reported costs are what each strategy would have spent alone.

Every run writes its raw results (config, per-strategy figures, elapsed time, cache hits)
with provenance (git revision, load average at start and end, CPU count, model sha256, argv)
to ``docs/data/strategies/strategies-<UTC time>.json`` via ``evaluation/pools/provenance.py``, and
prints the path.

Small run: ``python benchmarks/strategies_bench.py --problems 6 --n 4 --max-tokens 320``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from google.protobuf import struct_pb2

from evaluation.pools.provenance import provenance, write_raw
from services.common.answers import answers_equivalent, extract_answer, normalize_answer
from services.gen.ttc.v1 import common_pb2, orchestrator_pb2
from services.search.interfaces import (
    Candidate,
    CandidateTextSink,
    GenerateCall,
    Generation,
    PartialSink,
    Policy,
    Verdict,
    Verification,
    Verifier,
    VerifyCall,
)
from services.search.run import replay, run_search

SYSTEM_PROMPT = "Solve the problem. Think step by step, then give the final answer as \\boxed{ANSWER}."
DATASETS = ("basic_arithmetic", "chain_sum", "gsm_symbolic")
PARALLEL = ("single", "self_consistency", "best_of_n", "weighted_vote")
DEFAULT_STRATEGIES = "single,self_consistency,best_of_n,weighted_vote"


# ---------------------------------------------------------------------------------- problems
@dataclass
class BenchProblem:
    id: str
    dataset: str
    question: str
    answer: str
    entry: dict[str, Any]
    checker: Any
    seed: int

    def correct(self, text: str) -> bool:
        """The data set's own checker on the extracted answer (normalized spelling also tried)."""
        extracted = extract_answer(text)
        if extracted is None:
            return False
        for attempt in (extracted, normalize_answer(extracted)):
            try:
                if float(self.checker.score_answer(attempt, self.entry)) >= 0.99:
                    return True
            except Exception:  # a checker that chokes on odd text is a wrong answer, not a crash
                continue
        return answers_equivalent(extracted, self.answer)


def load_problems(count: int, datasets: Sequence[str], seed: int) -> list[BenchProblem]:
    import reasoning_gym

    per = math.ceil(count / len(datasets))
    pools = {name: reasoning_gym.create_dataset(name, size=per, seed=seed) for name in datasets}
    problems: list[BenchProblem] = []
    for i in range(per):
        for name in datasets:
            if len(problems) >= count:
                break
            entry = pools[name][i]
            problems.append(
                BenchProblem(
                    f"{name}-{seed}-{i}",
                    name,
                    str(entry["question"]),
                    str(entry["answer"]),
                    entry,
                    pools[name],
                    seed * 100_003 + len(problems),
                )
            )
    return problems


# ---------------------------------------------------------------------------------- engines
@dataclass
class CachingPolicy:
    """A ``Policy`` over an in-process engine; identical calls (same seeds) hit a cache and
    are charged their original seconds, so each strategy's cost is what it would pay alone."""

    engine: Any
    cache: dict[Any, tuple[Generation, float]] = field(default_factory=dict)
    charged_seconds: float = 0.0
    hits: int = 0
    enabled: bool = True

    async def generate(
        self,
        call: GenerateCall,
        *,
        on_text: CandidateTextSink | None = None,
        on_partial: PartialSink | None = None,
    ) -> Generation:
        from services.policy.engines import base as eb

        del on_text, on_partial  # the benchmark's problems are plain text, not streamed or cut short
        messages, assistant_prefix, seeds = call.messages, call.assistant_prefix, call.seeds
        max_tokens = call.max_tokens
        temperature, top_p, stop, logprobs = call.temperature, call.top_p, call.stop, call.logprobs
        presence_penalty, frequency_penalty = call.presence_penalty, call.frequency_penalty
        n = call.n

        penalties = (presence_penalty, frequency_penalty)
        key = (tuple(messages), assistant_prefix, tuple(seeds), max_tokens, temperature, top_p, tuple(stop), penalties)
        cached = self.cache.get(key) if self.enabled else None
        if cached is not None and (not logprobs or all(c.logprobs for c in cached[0].candidates if c.text)):
            self.hits += 1
            self.charged_seconds += cached[1]
            return cached[0]
        prompt = eb.Prompt(
            messages=tuple(eb.Message(m.role, m.content) for m in messages), assistant_prefix=assistant_prefix
        )
        sampling = eb.Sampling(
            n=n,
            seeds=tuple(seeds),
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            presence_penalty=presence_penalty,
            frequency_penalty=frequency_penalty,
            stop=tuple(stop),
            logprobs=logprobs,
        )
        started = time.perf_counter()
        out = await self.engine.generate(prompt, sampling, "bench")
        seconds = time.perf_counter() - started
        generation = Generation(
            candidates=tuple(
                Candidate(c.text, c.finish_reason, c.completion_tokens, c.seed, tuple(t.logprob for t in c.logprobs))
                for c in out.completions
            ),
            prompt_tokens=out.prompt_tokens,
            cached_tokens=out.cached_tokens,
        )
        self.cache[key] = (generation, seconds)
        self.charged_seconds += seconds
        return generation


@dataclass
class EngineScorer:
    """The verifier's ``PolicyScorer`` port over the same in-process engine."""

    engine: Any
    seconds: float = 0.0

    async def parallelism(self) -> int:
        """One in-process llama.cpp context: concurrent scoring calls would only queue."""
        return 1

    async def score(self, prompt: Any, continuations: Sequence[str], *, model: str) -> Any:
        from services.policy.engines import base as eb
        from services.verifier.types import ScoreResult, Spend

        p = eb.Prompt(messages=tuple(eb.Message(m.role, m.content) for m in prompt.messages), text=prompt.text)
        started = time.perf_counter()
        scored = await self.engine.score(p, list(continuations), 0, "bench")
        self.seconds += time.perf_counter() - started
        return ScoreResult(
            [s.total_logprob for s in scored.scores], Spend(prompt_tokens=scored.prompt_tokens, policy_calls=1)
        )


class _NoSandbox:
    async def run_tests(self, code: str, tests: Any, limits: Any) -> Any:
        raise RuntimeError("the strategy benchmark runs no code tests")


@dataclass
class InProcessVerifier:
    """A ``Verifier`` over the verifier service's own verifier classes (no network); an
    identical call (same candidates) is answered from a cache and charged its original cost."""

    registry: Any
    cache: dict[VerifyCall, tuple[Verification, float]] = field(default_factory=dict)
    charged_seconds: float = 0.0
    enabled: bool = True

    async def verify(self, call: VerifyCall) -> Verification:
        cached = self.cache.get(call) if self.enabled else None
        if cached is not None:
            self.charged_seconds += cached[1]
            return cached[0]
        started = time.perf_counter()
        verification = await self._verify(call)
        seconds = time.perf_counter() - started
        self.cache[call] = (verification, seconds)
        self.charged_seconds += seconds
        return verification

    async def _verify(self, call: VerifyCall) -> Verification:
        from services.verifier import types as vt

        job = vt.VerifyJob(
            verifier=call.verifier,
            candidates=call.candidates,
            problem=tuple(vt.Message(m.role, m.content) for m in call.problem),
            reference=call.reference,
            aggregation=vt.Aggregation(call.aggregation),
        )
        kind = self.registry.get(call.verifier)
        kind.validate(job)
        outcome = await kind.verify(job)
        return Verification(
            tuple(
                Verdict(v.score, v.passed, tuple(v.step_scores), v.feedback or v.error, v.extracted_answer)
                for v in outcome.verdicts
            ),
            prompt_tokens=outcome.spend.prompt_tokens,
            completion_tokens=outcome.spend.completion_tokens,
        )


async def make_components(args: argparse.Namespace) -> tuple[Policy, Verifier, Any, Any]:
    if args.engine == "grpc":
        from services.common.grpc_client import insecure_channel
        from services.orchestrator.clients import GrpcPolicy, GrpcVerifier

        return (
            GrpcPolicy(insecure_channel(args.policy_target), args.model),
            GrpcVerifier(insecure_channel(args.verifier_target), args.model),
            None,
            None,
        )
    from services.policy.engines.llamacpp.engine import create_engine
    from services.policy.settings import PolicySettings
    from services.verifier.registry import build_registry
    from services.verifier.settings import VerifierSettings

    settings = PolicySettings(model=args.model, n_ctx=args.n_ctx, kv_cache_tokens=args.n_ctx * (args.n + 1))
    engine = await create_engine(settings)
    scorer = EngineScorer(engine)
    registry = build_registry(VerifierSettings(), scorer, _NoSandbox())
    return CachingPolicy(engine), InProcessVerifier(registry), engine, scorer


# ---------------------------------------------------------------------------------- running
def strategy_spec(name: str, args: argparse.Namespace) -> orchestrator_pb2.StrategySpec:
    params: dict[str, Any] = {}
    verifier = ""
    n = args.n
    if name == "single":
        n = 1
    elif name in ("best_of_n", "weighted_vote"):
        verifier = args.verifier
    elif name == "beam_search":
        params = {
            "beam_width": max(1, args.n // 4),
            "expansion": 4,
            "max_steps": 8,
            "step_max_tokens": min(96, args.max_tokens),
        }
        verifier = "prm"
    elif name == "dvts":
        params = {
            "subtrees": max(1, args.n // 4),
            "expansion": 4,
            "max_steps": 8,
            "step_max_tokens": min(96, args.max_tokens),
        }
        verifier = "prm"
    elif name == "mcts":
        params = {"simulations": max(1, args.n // 2), "expansion_width": 2, "step_max_tokens": min(96, args.max_tokens)}
        verifier = args.verifier
    elif name in ("ab_mcts_a", "ab_mcts_m"):
        params = {"batch": 4}
        verifier = args.verifier
    elif name == "revision":
        n = max(1, args.n // 4)
        params = {"rounds": 2}
        verifier = args.verifier
    elif name == "budget_forcing":
        n = 1
        params = {"min_thinking_tokens": args.max_tokens // 2, "max_thinking_tokens": args.max_tokens}
    struct = struct_pb2.Struct()
    struct.update(params)
    return orchestrator_pb2.StrategySpec(name=name, n=n, verifier=verifier, params=struct)


@dataclass
class Row:
    strategy: str
    problems: int = 0
    selected: int = 0
    errors: int = 0
    generated_tokens: int = 0
    verifier_prompt_tokens: int = 0  # judge prompts the engine prefilled
    verifier_generated_tokens: int = 0
    seconds: float = 0.0
    pools: list[list[bool]] = field(default_factory=list)
    pool_answers: list[list[str]] = field(default_factory=list)
    terminations: dict[str, int] = field(default_factory=dict)
    replays: int = 0
    replays_matched: int = 0

    @property
    def verifier_tokens(self) -> int:
        return self.verifier_prompt_tokens + self.verifier_generated_tokens


async def run_one(
    problem: BenchProblem,
    name: str,
    args: argparse.Namespace,
    policy: Policy,
    verifier: Verifier,
    scorer: Any,
    row: Row,
) -> None:
    job = orchestrator_pb2.SearchJob(
        job_id=f"{problem.id}-{name}",
        messages=[
            common_pb2.ChatMessage(role="system", content=SYSTEM_PROMPT),
            common_pb2.ChatMessage(role="user", content=problem.question),
        ],
        strategy=strategy_spec(name, args),
        budget=orchestrator_pb2.Budget(max_generated_tokens=args.budget or args.n * args.max_tokens),
        temperature=args.temperature,
        top_p=1.0,
        max_tokens=args.max_tokens,
        seed=problem.seed,
    )
    policy_seconds = getattr(policy, "charged_seconds", 0.0)
    verifier_seconds = getattr(verifier, "charged_seconds", 0.0)
    started = time.perf_counter()
    result, trace = await run_search(job, policy, verifier)
    wall = time.perf_counter() - started
    if isinstance(policy, CachingPolicy):  # charge cached calls as if they had run
        wall = (policy.charged_seconds - policy_seconds) + (
            getattr(verifier, "charged_seconds", 0.0) - verifier_seconds
        )
    row.problems += 1
    row.selected += problem.correct(result.answer)
    term = orchestrator_pb2.Termination.Name(result.termination).removeprefix("TERMINATION_").lower()
    row.terminations[term] = row.terminations.get(term, 0) + 1
    row.errors += result.termination == orchestrator_pb2.TERMINATION_ERROR
    row.generated_tokens += result.budget_used.generated_tokens
    row.verifier_prompt_tokens += result.budget_used.verifier_prompt_tokens
    row.verifier_generated_tokens += result.budget_used.verifier_generated_tokens
    row.seconds += wall
    if name in PARALLEL:
        samples = [n.text for n in trace.nodes if n.action == "generate"]
        row.pools.append([problem.correct(t) for t in samples])
        row.pool_answers.append([normalize_answer(extract_answer(t) or "") for t in samples])
    if args.replay_check and name in args.replay_check.split(","):
        # Re-run from the stored trace with caches off: does the engine make the same choices?
        for component in (policy, verifier):
            if hasattr(component, "enabled"):
                component.enabled = False
        try:
            comparison, _, _ = await replay(trace, policy, verifier)
        finally:
            for component in (policy, verifier):
                if hasattr(component, "enabled"):
                    component.enabled = True
        row.replays += 1
        row.replays_matched += comparison.matches
        if args.verbose:
            print(f"  replay {name}: matches={comparison.matches} first_divergence={comparison.first_divergence}")
    if args.verbose:
        print(
            f"  {name:16s} {problem.id:28s} correct={problem.correct(result.answer)!s:5s} "
            f"tokens={result.budget_used.generated_tokens:5d} term={term} wall={wall:.1f}s",
            flush=True,
        )


def fmt(value: float) -> str:
    """A table cell: the value, or a dash where the strategy has no such figure (NaN)."""
    return "    -  " if math.isnan(value) else f"{value:7.3f}"


def pool_metrics(row: Row, k: int) -> tuple[int, list[float]] | None:
    """(k, [pass@1, pass@k, maj@k, coverage]) over the strategy's own sample pools."""
    if not row.pools:
        return None
    from evaluation.stats.ledger import ProblemLedger, Sample, summarize

    ledgers = [
        ProblemLedger(tuple(Sample(a or None, c) for a, c in zip(answers, pool, strict=True)))
        for answers, pool in zip(row.pool_answers, row.pools, strict=True)
    ]
    s = summarize(ledgers, k=max(1, min(k, min(len(p) for p in row.pools))))
    return s.k, [s.pass_at_1, s.pass_at_k, s.maj_at_k, s.coverage]


def report(rows: dict[str, Row], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"config": vars(args).copy(), "strategies": {}}
    bon = rows.get("best_of_n")
    bon_eff = None
    if bon and bon.problems and bon.generated_tokens:
        bon_eff = (bon.selected / bon.problems) / (bon.generated_tokens / bon.problems / 1000)
    header = (
        f"{'strategy':16s} {'pass@1':>7s} {'pass@k':>7s} {'maj@k':>7s} {'select':>7s} {'cover':>7s} "
        f"{'gen tok':>8s} {'ver tok':>8s} {'wall s':>7s} {'acc/1k':>7s} {'vs BoN':>7s}  notes"
    )
    print()
    print(
        f"problems={args.problems} n={args.n} max_tokens={args.max_tokens} temperature={args.temperature} "
        f"budget={args.budget or args.n * args.max_tokens} tokens/problem, verifier={args.verifier}, "
        f"datasets={args.datasets}, seed={args.seed}; per-problem means"
    )
    print(header)
    print("-" * len(header))
    for name, row in rows.items():
        if not row.problems:
            continue
        acc = row.selected / row.problems
        tokens = row.generated_tokens / row.problems
        eff = acc / (tokens / 1000) if tokens else 0.0
        rel = eff / bon_eff if bon_eff else float("nan")
        pm = pool_metrics(row, args.n)
        vals = pm[1] if pm else [float("nan")] * 4
        notes = []
        if bon and name != "best_of_n" and bon.problems and acc < bon.selected / bon.problems:
            notes.append("WORSE than best-of-N at equal budget")
        if row.errors:
            notes.append(f"{row.errors} errors")
        if row.replays:
            notes.append(f"replayed to the same choices {row.replays_matched}/{row.replays}")
        notes.append(",".join(f"{k}={v}" for k, v in sorted(row.terminations.items())))
        print(
            f"{name:16s} {fmt(vals[0])} {fmt(vals[1])} {fmt(vals[2])} {acc:7.3f} {fmt(vals[3])} "
            f"{tokens:8.0f} {row.verifier_tokens / row.problems:8.0f} {row.seconds / row.problems:7.1f} "
            f"{eff:7.3f} {fmt(rel)}  {'; '.join(notes)}"
        )
        out["strategies"][name] = {
            "selected": acc,
            "pool": dict(zip(("k", "pass@1", "pass@k", "maj@k", "coverage"), [pm[0], *pm[1]], strict=True))
            if pm
            else None,
            "generated_tokens": tokens,
            "verifier_prompt_tokens": row.verifier_prompt_tokens / row.problems,
            "verifier_generated_tokens": row.verifier_generated_tokens / row.problems,
            "wall_seconds": row.seconds / row.problems,
            "accuracy_per_1k_tokens": eff,
            "relative_to_best_of_n": rel,
            "terminations": row.terminations,
        }
    single, sc = rows.get("single"), rows.get("self_consistency")
    if single and sc and single.problems and sc.problems:
        a, b = single.selected / single.problems, sc.selected / sc.problems
        verdict = "YES" if b > a else "NO"
        print(f"\nself-consistency beats single-sample accuracy: {verdict} ({b:.3f} vs {a:.3f})")
        if sc.pools:
            pm = pool_metrics(sc, args.n)
            if pm:
                print(f"(single-sample accuracy from all {pm[0]} samples of each problem, pass@1: {pm[1][0]:.3f})")
    return out


async def main_async(args: argparse.Namespace) -> Path:
    """Run the benchmark, print the table and write the raw results; returns the path written."""
    start_state = provenance(args.model, engine=args.engine)  # load average before the model loads
    problems = load_problems(args.problems, args.datasets.split(","), args.seed)
    strategies = [s for s in args.strategies.split(",") if s]
    policy, verifier, engine, scorer = await make_components(args)
    rows = {name: Row(name) for name in strategies}
    started = time.perf_counter()
    try:
        for i, problem in enumerate(problems):
            if args.time_limit and time.perf_counter() - started > args.time_limit:
                print(f"time limit of {args.time_limit:.0f}s reached: reporting the {i} problems done", flush=True)
                args.problems = i
                break
            for name in strategies:
                await run_one(problem, name, args, policy, verifier, scorer, rows[name])
            print(f"[{i + 1}/{len(problems)} problems, {time.perf_counter() - started:.0f}s]", flush=True)
    finally:
        if engine is not None:
            await engine.close()
    out = report(rows, args)
    out["elapsed_seconds"] = time.perf_counter() - started
    if isinstance(policy, CachingPolicy):
        out["cache_hits"] = policy.hits
    path = write_raw("strategies", out, model=args.model, started=start_state, argv=sys.argv)
    print("raw results:", path)
    return path


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--strategies", default=DEFAULT_STRATEGIES, help="comma-separated registry names")
    parser.add_argument("--n", type=int, default=8, help="samples per parallel strategy (k of pass@k, maj@k)")
    parser.add_argument("--max-tokens", type=int, default=384, help="per candidate; the 0.5B model is verbose")
    parser.add_argument(
        "--budget", type=int, default=0, help="generated-token budget per problem (default n*max_tokens)"
    )
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--verifier", default="orm", help="verifier of best_of_n / weighted_vote / mcts / ab_mcts")
    parser.add_argument("--engine", choices=("llamacpp", "grpc"), default="llamacpp")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--policy-target", default="127.0.0.1:50051")
    parser.add_argument("--verifier-target", default="127.0.0.1:50052")
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument(
        "--replay-check", default="", help="comma-separated strategies to replay from their trace (caches off)"
    )
    parser.add_argument(
        "--time-limit", type=float, default=0, help="stop starting new problems after this many seconds, then report"
    )
    parser.add_argument("--verbose", action="store_true")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main_async(parse_args()))
