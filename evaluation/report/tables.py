"""Cost-versus-accuracy tables from request records: pure aggregation, no I/O.

Rows are (effort, strategy, level) groups, with an ``all`` level per cell. Accuracy numbers
come from the ledger (:mod:`evaluation.stats.ledger`): a request whose trace lists
candidates is one pool (pass@1 / pass@k / maj@k / coverage over its candidates); requests
without candidates are pooled per problem (the ``samples`` of a run). ``selected`` is what
the system returned. Errors are counted apart and excluded from every accuracy denominator.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from evaluation.report.records import RequestRecord
from evaluation.stats.ledger import ProblemLedger, Sample, summarize


@dataclass(frozen=True)
class Pricing:
    """Per-token prices (USD per million) or a per-accelerator-hour price. Prefill and decode
    are priced apart: ``prompt_per_mtok`` for every token an engine processed as input
    (policy, verifier judge and probe prompts), ``completion_per_mtok`` for every token it
    generated."""

    mode: str = "tokens"  # "tokens" | "gpu_hour"
    prompt_per_mtok: float = 0.05
    completion_per_mtok: float = 0.20
    gpu_hour: float = 2.0
    concurrency: int = 1  # requests sharing the accelerator while a request's latency elapses

    def cost(self, records: Sequence[RequestRecord]) -> float:
        if self.mode == "gpu_hour":
            # Each request holds 1/concurrency of the machine for its latency.
            busy = sum(r.latency_s for r in records) / max(1, self.concurrency)
            return busy / 3600.0 * self.gpu_hour
        prompt = sum(r.prompt_tokens for r in records)
        completion = sum(r.completion_tokens for r in records)
        return (prompt * self.prompt_per_mtok + completion * self.completion_per_mtok) / 1e6


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (``q`` in [0, 100]); ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass
class Row:
    effort: str
    strategy: str
    level: str
    requests: int
    errors: int
    error_kinds: dict[str, int]
    scored: int
    selected: float | None
    pass_at_1: float | None
    pass_at_k: float | None
    maj_at_k: float | None
    coverage: float | None
    k: int
    truncated: float | None  # share of answered requests cut at max_tokens (finish_reason "length")
    mean_tokens: float
    mean_prompt_tokens: float  # prefill: every prompt token an engine processed, judges' included
    mean_completion_tokens: float  # decode: every generated token
    mean_reasoning_tokens: float
    tokens_per_correct: float | None
    cost_per_correct: float | None
    latency_p50: float | None
    latency_p95: float | None
    latency_p99: float | None
    ttft_p50: float | None
    ttfa_p50: float | None
    strategies_applied: dict[str, int] = field(default_factory=dict)
    efforts_applied: dict[str, int] = field(default_factory=dict)
    terminations: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.effort} / {self.strategy}"


def ledgers(records: Sequence[RequestRecord]) -> list[ProblemLedger]:
    """One pool per request that reports candidates; other requests pooled per problem."""
    pools: list[ProblemLedger] = []
    by_problem: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.outcome == "error":
            continue
        if len(r.candidates) > 1:
            samples = tuple(Sample(a, c) for a, c in r.candidates)
            pools.append(ProblemLedger(samples, bool(r.correct)))
        else:
            by_problem[r.problem_id].append(r)
    for group in by_problem.values():
        samples = tuple(Sample(r.answer, bool(r.correct)) for r in group)
        pools.append(ProblemLedger(samples, bool(group[0].correct)))
    return pools


def _count(values: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for v in values:
        out[v or "?"] += 1
    return dict(sorted(out.items()))


def summarize_group(effort: str, strategy: str, level: str, records: Sequence[RequestRecord], pricing: Pricing) -> Row:
    valid = [r for r in records if r.outcome != "error"]
    errors = [r for r in records if r.outcome == "error"]
    correct = sum(1 for r in valid if r.correct)
    pools = ledgers(records)
    ledger = summarize(pools) if pools else None
    tokens = sum(r.total_tokens for r in records)
    latencies = [r.latency_s for r in valid]
    ttfts = [r.ttft_s for r in valid if r.ttft_s is not None]
    ttfas = [r.ttfa_s for r in valid if r.ttfa_s is not None]
    n = max(1, len(records))
    return Row(
        effort=effort,
        strategy=strategy,
        level=level,
        requests=len(records),
        errors=len(errors),
        error_kinds=_count(r.error_kind for r in errors),
        scored=len(valid),
        selected=correct / len(valid) if valid else None,
        pass_at_1=ledger.pass_at_1 if ledger and ledger.scored_problems else None,
        pass_at_k=ledger.pass_at_k if ledger and ledger.scored_problems else None,
        maj_at_k=ledger.maj_at_k if ledger and ledger.scored_problems else None,
        coverage=ledger.coverage if ledger and ledger.scored_problems else None,
        k=ledger.k if ledger else 0,
        truncated=sum(r.finish_reason == "length" for r in valid) / len(valid) if valid else None,
        mean_tokens=tokens / n,
        mean_prompt_tokens=sum(r.prompt_tokens for r in records) / n,
        mean_completion_tokens=sum(r.completion_tokens for r in records) / n,
        mean_reasoning_tokens=sum(r.reasoning_tokens for r in records) / n,
        # Every request's tokens count, including failed and wrong ones: that is the real cost.
        tokens_per_correct=tokens / correct if correct else None,
        cost_per_correct=pricing.cost(records) / correct if correct else None,
        latency_p50=percentile(latencies, 50),
        latency_p95=percentile(latencies, 95),
        latency_p99=percentile(latencies, 99),
        ttft_p50=percentile(ttfts, 50),
        ttfa_p50=percentile(ttfas, 50),
        strategies_applied=_count(r.strategy for r in valid),
        efforts_applied=_count(r.effort_applied for r in valid),
        terminations=_count(r.termination for r in valid),
    )


EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh")


def effort_order(effort: str) -> int:
    return EFFORT_ORDER.index(effort) if effort in EFFORT_ORDER else len(EFFORT_ORDER)


def build_rows(records: Sequence[RequestRecord], pricing: Pricing) -> list[Row]:
    """Rows per (effort, strategy, level) plus an ``all`` row per (effort, strategy)."""
    groups: dict[tuple[str, str, str], list[RequestRecord]] = defaultdict(list)
    for r in records:
        effort, strategy = r.cell
        groups[(effort, strategy, str(r.level))].append(r)
        groups[(effort, strategy, "all")].append(r)
    keys = sorted(groups, key=lambda k: (effort_order(k[0]), k[1], k[2] == "all", k[2]))
    return [summarize_group(*key, groups[key], pricing) for key in keys]


def pareto(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points on the frontier: no other point has lower-or-equal cost (x) and
    higher-or-equal accuracy (y) with one of them strict. Sorted by cost."""
    frontier = []
    for i, (x, y) in enumerate(points):
        dominated = any((x2 <= x and y2 >= y) and (x2 < x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i)
        if not dominated:
            frontier.append(i)
    return sorted(frontier, key=lambda i: points[i])


@dataclass(frozen=True)
class RunTotals:
    requests: int
    errors: int
    wall_s: float
    requests_per_s: float
    completion_tokens_per_s: float
    correct_per_s: float


def totals(records: Sequence[RequestRecord]) -> RunTotals:
    """Throughput over the run's wall-clock span (first start to last finish)."""
    if not records:
        return RunTotals(0, 0, 0.0, 0.0, 0.0, 0.0)
    start = min(r.started_at for r in records)
    end = max(r.started_at + r.latency_s for r in records)
    wall = max(end - start, 1e-9)
    return RunTotals(
        requests=len(records),
        errors=sum(1 for r in records if r.outcome == "error"),
        wall_s=wall,
        requests_per_s=len(records) / wall,
        completion_tokens_per_s=sum(r.completion_tokens for r in records) / wall,
        correct_per_s=sum(1 for r in records if r.correct) / wall,
    )


def compare(base: Sequence[Row], new: Sequence[Row]) -> list[dict[str, object]]:
    """Per matching row, the change in selected accuracy, mean tokens and p95 latency."""
    old = {(r.effort, r.strategy, r.level): r for r in base}
    out: list[dict[str, object]] = []
    for r in new:
        b = old.get((r.effort, r.strategy, r.level))
        if b is None:
            continue

        def delta(a: float | None, c: float | None) -> float | None:
            return None if a is None or c is None else c - a

        out.append(
            {
                "effort": r.effort,
                "strategy": r.strategy,
                "level": r.level,
                "selected": (b.selected, r.selected, delta(b.selected, r.selected)),
                "mean_tokens": (b.mean_tokens, r.mean_tokens, delta(b.mean_tokens, r.mean_tokens)),
                "latency_p95": (b.latency_p95, r.latency_p95, delta(b.latency_p95, r.latency_p95)),
                "errors": (b.errors, r.errors, r.errors - b.errors),
            }
        )
    return out
