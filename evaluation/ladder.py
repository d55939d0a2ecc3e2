"""The effort ladder on held-out problems: what each ``reasoning_effort`` buys, with its ledger.

Pure: per-problem measured outcomes of pinned configurations in, per-effort rows out. The
caller routes every held-out problem through the served routing table (the gateway's own
zero-token estimator, task-type classifier and routes) and hands over which configuration
each effort chose; the outcome of an effort on a problem is that configuration's measured
request on that very problem. Every row carries its budget (generated and prompt tokens),
a 95% Wilson interval, and the ledger of the candidate pools behind it (PRIMER §2).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evaluation.intervals import wilson
from evaluation.ledger import LedgerSummary, ProblemLedger, Sample, summarize
from evaluation.records import RequestRecord


@dataclass(frozen=True)
class LadderRow:
    """One effort (or fixed configuration) over a set of held-out problems."""

    name: str
    problems: int
    correct: int
    failures: int  # infrastructure failures: never counted as wrong, left out of accuracy
    ci95: tuple[float, float]
    generated_tokens: float  # mean per problem
    prompt_tokens: float
    latency_p50_s: float | None
    configs: dict[str, int] = field(default_factory=dict)  # configuration → problems routed to it
    ledger: dict[str, float | int] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        return self.correct / self.problems if self.problems else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "accuracy": self.accuracy}


def _ledger(records: Sequence[RequestRecord]) -> LedgerSummary:
    pools = []
    for r in records:
        samples = tuple(Sample(a, c) for a, c in r.candidates) or (Sample(r.answer, bool(r.correct)),)
        pools.append(ProblemLedger(samples, bool(r.correct)))
    return summarize(pools)


def ladder_row(name: str, records: Sequence[RequestRecord]) -> LadderRow:
    """Accuracy with its interval, budget and ledger over one record per problem."""
    scored = [r for r in records if r.outcome != "error"]
    correct = sum(bool(r.correct) for r in scored)
    latencies = sorted(r.latency_s for r in scored)
    return LadderRow(
        name=name,
        problems=len(scored),
        correct=correct,
        failures=len(records) - len(scored),
        ci95=wilson(correct, len(scored)),
        generated_tokens=sum(r.completion_tokens for r in scored) / len(scored) if scored else 0.0,
        prompt_tokens=sum(r.prompt_tokens for r in scored) / len(scored) if scored else 0.0,
        latency_p50_s=latencies[len(latencies) // 2] if latencies else None,
        configs=dict(Counter(r.strategy_pinned for r in records)),
        ledger=_ledger(scored).as_dict() if scored else {},
    )


def effort_rows(
    chosen: Mapping[str, Mapping[str, str]], measured: Mapping[tuple[str, str], RequestRecord],
) -> tuple[list[LadderRow], list[str]]:  # fmt: skip
    """``chosen[effort][problem_id]`` = configuration label; ``measured[(problem_id, label)]`` =
    that configuration's record. Returns one row per effort (in the given order) and the
    (effort, problem, label) triples that were routed to an unmeasured configuration."""
    rows, missing = [], []
    for effort, by_problem in chosen.items():
        records = []
        for problem_id, label in by_problem.items():
            record = measured.get((problem_id, label))
            if record is None:
                missing.append(f"{effort}/{problem_id}/{label}")
                continue
            records.append(record)
        rows.append(ladder_row(effort, records))
    return rows, missing


def monotone(rows: Sequence[LadderRow]) -> bool:
    """Whether point accuracy never falls from one rung to the next."""
    return all(b.accuracy >= a.accuracy - 1e-12 for a, b in itertools.pairwise(rows))
