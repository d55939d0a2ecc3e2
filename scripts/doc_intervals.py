"""The 95% intervals quoted in the docs, recomputed from the raw data they cite.

    .venv/bin/python scripts/doc_intervals.py

Wilson intervals for proportions (``evaluation.stats.intervals.wilson``), a bootstrap over problems for
means of per-problem values (``evaluation.pricing.table.bootstrap_interval``) and Fisher's z for
Spearman correlations (variance 1.06/(n - 3)). Where a run's records are not in the repository
(the 2026-11-30 load test, the strategies benchmark), the interval is computed from the counts
the doc states (k of n) and printed as such; nothing is read from a rendered report.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.stats.intervals import bootstrap_interval, wilson  # noqa: E402


def pct(lo_hi: tuple[float, float]) -> str:
    return f"[{100 * lo_hi[0]:.0f}, {100 * lo_hi[1]:.0f}]"


def fisher(rho: float, n: int) -> tuple[float, float]:
    z, half = math.atanh(rho), 1.96 * math.sqrt(1.06 / (n - 3))
    return math.tanh(z - half), math.tanh(z + half)


def ladder() -> None:
    data = json.loads((ROOT / "docs/ladder/heldout-ladder.json").read_text())
    print("docs/ladder/heldout-ladder.json: fixed configurations, accuracy and coverage (Wilson 95%)")
    for group, g in data["groups"].items():
        for row in g["fixed"]:
            n, k = row["problems"], row["correct"]
            cover = round(row["ledger"]["coverage"] * n)
            print(
                f"  {group[:12]:12s} {row['name']:42s} {k}/{n} {pct(wilson(k, n))}"
                f"  coverage {cover}/{n} {pct(wilson(cover, n))}"
            )


def code_exec() -> None:
    records = [json.loads(line) for line in (ROOT / "docs/data/code_exec/records.jsonl").read_text().splitlines()]
    n = len(records)
    pool = [sum(r["candidate_correct"]) / len(r["candidate_correct"]) for r in records]
    covered = sum(any(r["candidate_correct"]) for r in records)
    lo, hi = bootstrap_interval(pool)
    print(f"docs/data/code_exec/records.jsonl: {n} problems")
    print(f"  pool mean pass@1 {sum(pool) / n:.2f} bootstrap 95% [{lo:.2f}, {hi:.2f}]")
    print(f"  coverage {covered}/{n} = {covered / n:.2f} Wilson {pct(wilson(covered, n))}")


def answer_form() -> None:
    data = json.loads((ROOT / "docs/data/answer_form_heldout.json").read_text())
    k, n = data["summary"]["right_and_in_form"], data["summary"]["calls"]
    print(f"docs/data/answer_form_heldout.json: right and in form {k}/{n} Wilson {pct(wilson(k, n))}")


def stated_counts() -> None:
    print("from counts stated in the docs (records not in the repository):")
    for label, k, n in [
        ("loadtests.md 1 of 9", 1, 9),
        ("loadtests.md 2 of 9", 2, 9),
        ("loadtests.md 3 of 9", 3, 9),
        ("loadtests.md cut at max_tokens 8 of 9", 8, 9),
        ("strategies.md 50 problems: single 13/50", 13, 50),
        ("strategies.md 50 problems: self-consistency selected 11/50", 11, 50),
        ("strategies.md 50 problems: coverage 17/50", 17, 50),
        ("strategies.md 29 problems: single 8/29", 8, 29),
        ("strategies.md 29 problems: self-consistency selected 7/29", 7, 29),
        ("strategies.md 29 problems: best-of-N selected 5/29", 5, 29),
        ("strategies.md 29 problems: coverage 11/29", 11, 29),
    ]:
        print(f"  {label}: Wilson {pct(wilson(k, n))}")
    for label, rho, n in [("loadtests.md probe", -0.09, 9), ("loadtests.md embedding + probe", 0.61, 9)]:
        lo, hi = fisher(rho, n)
        print(f"  {label} Spearman {rho} (n={n}): Fisher z 95% [{lo:.2f}, {hi:.2f}]")


if __name__ == "__main__":
    ladder()
    code_exec()
    answer_form()
    stated_counts()
