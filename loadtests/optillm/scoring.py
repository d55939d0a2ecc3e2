"""Aggregation of the side-by-side records: pure, no I/O.

A record is one (configuration, problem) request as a JSON object (``optillm_compare.py``
writes them): ``config``, ``problem_id``, ``kind`` (task kind), ``outcome`` (``correct``,
``wrong`` or ``error``), ``generated_tokens`` (what the upstream engine decoded for it: the
gateway's own usage summed over every call OptiLLM made, or our gateway's usage for an
effort), ``prompt_tokens`` and ``latency_s`` (the client's wall clock).

An error (the proxy or the gateway failing, a timeout: no answer to grade) is never a wrong
answer: accuracy and its interval are over the graded requests, and the errors are counted
beside it, so an approach that fails often shows it there. Tokens and latency are over every
request, errors included: what was spent was spent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.report.tables import percentile
from evaluation.stats.intervals import wilson

OUTCOMES = ("correct", "wrong", "error")
ALL = "all"


@dataclass(frozen=True)
class Row:
    """One configuration over one group of problems (a task kind, or ``all``)."""

    config: str
    group: str
    problems: int
    correct: int
    errors: int
    accuracy: float
    ci_low: float
    ci_high: float
    mean_generated_tokens: float
    mean_prompt_tokens: float
    p50_latency_s: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def row(config: str, group: str, records: Sequence[dict[str, Any]]) -> Row:
    """``problems``: the graded requests (errors apart); tokens and latency over all of them."""
    n = len(records)
    errors = sum(r["outcome"] == "error" for r in records)
    graded = n - errors
    correct = sum(r["outcome"] == "correct" for r in records)
    low, high = wilson(correct, graded)
    return Row(
        config=config,
        group=group,
        problems=graded,
        correct=correct,
        errors=errors,
        accuracy=correct / graded if graded else 0.0,
        ci_low=low,
        ci_high=high,
        mean_generated_tokens=sum(int(r.get("generated_tokens") or 0) for r in records) / n if n else 0.0,
        mean_prompt_tokens=sum(int(r.get("prompt_tokens") or 0) for r in records) / n if n else 0.0,
        p50_latency_s=percentile([float(r["latency_s"]) for r in records], 50),
    )


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per (config, problem): the last one written (a resumed run re-asks nothing,
    but a record appended twice must not count twice)."""
    kept: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        kept[(r["config"], r["problem_id"])] = r
    return list(kept.values())


def summarize(records: Iterable[dict[str, Any]], configs: Sequence[str]) -> list[Row]:
    """Rows per configuration (in ``configs`` order): ``all`` first, then each task kind."""
    unique = latest(records)
    rows: list[Row] = []
    for config in configs:
        mine = [r for r in unique if r["config"] == config]
        if not mine:
            continue
        rows.append(row(config, ALL, mine))
        for kind in sorted({str(r["kind"]) for r in mine}):
            rows.append(row(config, kind, [r for r in mine if r["kind"] == kind]))
    return rows


def common_problems(records: Iterable[dict[str, Any]], configs: Sequence[str]) -> list[dict[str, Any]]:
    """The records of problems every configuration in ``configs`` has answered: a table over
    a partial (resumed, time-limited) run compares like with like."""
    unique = latest(records)
    answered: dict[str, set[str]] = {c: set() for c in configs}
    for r in unique:
        if r["config"] in answered:
            answered[r["config"]].add(r["problem_id"])
    shared = set.intersection(*answered.values()) if answered else set()
    return [r for r in unique if r["problem_id"] in shared and r["config"] in answered]


def verdict(rows: Sequence[Row], effort: str = "ttc:high", token_ratio: float = 1 / 3) -> dict[str, Any]:
    """The bar our efforts are held to: ``effort``'s accuracy at least OptiLLM's best approach's, at no more than
    ``token_ratio`` of that approach's generated tokens (overall rows). The best approach is the
    most accurate, fewer tokens breaking a tie."""
    overall = {r.config: r for r in rows if r.group == ALL}
    ours = overall.get(effort)
    theirs = [r for c, r in overall.items() if c.startswith("optillm:")]
    if ours is None or not theirs:
        return {"effort": effort, "decided": False, "why": "needs the effort and at least one OptiLLM approach"}
    best = max(theirs, key=lambda r: (r.accuracy, -r.mean_generated_tokens))
    ratio = ours.mean_generated_tokens / best.mean_generated_tokens if best.mean_generated_tokens else None
    accuracy_ok = ours.accuracy >= best.accuracy
    tokens_ok = ratio is not None and ratio <= token_ratio
    return {
        "effort": effort,
        "decided": True,
        "best_approach": best.config,
        "effort_accuracy": ours.accuracy,
        "best_accuracy": best.accuracy,
        "token_ratio": ratio,
        "accuracy_at_least_best": accuracy_ok,
        "tokens_at_most_a_third": tokens_ok,
        "met": accuracy_ok and tokens_ok,
    }


def markdown(rows: Sequence[Row]) -> str:
    """The table as Markdown: accuracy with its 95% Wilson interval, tokens, p50 latency."""
    lines = [
        "| configuration | group | graded | accuracy | 95% CI | errors | generated tok | prompt tok | p50 s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        p50 = f"{r.p50_latency_s:.1f}" if r.p50_latency_s is not None else "-"
        lines.append(
            f"| {r.config} | {r.group} | {r.problems} | {r.accuracy:.2f} | [{r.ci_low:.2f}, {r.ci_high:.2f}] "
            f"| {r.errors} | {r.mean_generated_tokens:.0f} | {r.mean_prompt_tokens:.0f} | {p50} |"
        )
    return "\n".join(lines)
