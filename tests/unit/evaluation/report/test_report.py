"""Report aggregation, Pareto frontier, records files and the rendered page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation.report.html import write_report
from evaluation.report.records import (
    RecordWriter,
    RequestRecord,
    done_keys,
    iter_records,
    read_run_meta,
    write_run_meta,
)
from evaluation.report.tables import Pricing, build_rows, compare, pareto, percentile, totals


def rec(problem: str, effort: str, strategy: str, outcome: str, *, level: int = 1, tokens: int = 100,
        latency: float = 1.0, candidates: list[tuple[str | None, bool]] | None = None,
        answer: str | None = "1", sample: int = 0) -> RequestRecord:  # fmt: skip
    return RequestRecord(
        run_id="r", problem_id=problem, dataset="d", level=level, split="heldout", sample=sample,
        effort_requested=effort, strategy_pinned=strategy, outcome=outcome,  # type: ignore[arg-type]
        correct=None if outcome == "error" else outcome == "correct", answer=answer,
        prompt_tokens=20, completion_tokens=tokens - 20, latency_s=latency, started_at=1000.0,
        candidates=candidates or [],
    )  # fmt: skip


def test_errors_are_kept_apart_from_wrong_answers() -> None:
    rows = build_rows(
        [rec("a", "low", "", "correct"), rec("b", "low", "", "wrong"), rec("c", "low", "", "error")], Pricing()
    )
    row = next(r for r in rows if r.level == "all")
    assert (row.requests, row.errors, row.scored) == (3, 1, 2)
    assert row.selected == pytest.approx(0.5)
    assert row.truncated == 0.0
    # Tokens per correct charges every request, failed ones included.
    assert row.tokens_per_correct == pytest.approx(300)


def test_candidate_pools_give_coverage_and_majority_apart_from_selection() -> None:
    pool: list[tuple[str | None, bool]] = [("7", False), ("7", False), ("5", True)]
    rows = build_rows([rec("a", "high", "self_consistency:n=3", "wrong", candidates=pool)], Pricing())
    row = rows[-1]
    assert row.selected == 0.0
    assert row.coverage == 1.0  # the right answer is in the pool …
    assert row.maj_at_k == 0.0  # … but the vote picks the wrong cluster
    assert row.pass_at_1 == pytest.approx(1 / 3)
    assert row.k == 3


def test_samples_without_candidates_pool_per_problem() -> None:
    records = [rec("a", "low", "", "correct", sample=0), rec("a", "low", "", "wrong", answer="2", sample=1)]
    row = build_rows(records, Pricing())[-1]
    assert row.k == 2 and row.pass_at_k == 1.0 and row.pass_at_1 == 0.5


def test_levels_and_all_rows() -> None:
    rows = build_rows([rec("a", "low", "", "correct", level=1), rec("b", "low", "", "wrong", level=3)], Pricing())
    assert [r.level for r in rows] == ["1", "3", "all"]


def test_pricing_modes() -> None:
    records = [rec("a", "low", "", "correct", tokens=1_000_020, latency=3600.0)]
    per_token = Pricing(prompt_per_mtok=1.0, completion_per_mtok=2.0)
    assert build_rows(records, per_token)[-1].cost_per_correct == pytest.approx((20 + 2_000_000) / 1e6)
    per_hour = Pricing(mode="gpu_hour", gpu_hour=3.0, concurrency=2)
    assert build_rows(records, per_hour)[-1].cost_per_correct == pytest.approx(1.5)


def test_percentile_interpolates() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([], 95) is None
    assert percentile([5.0], 99) == 5.0


def test_pareto_frontier() -> None:
    points = [(100, 0.5), (200, 0.6), (150, 0.4), (300, 0.6), (50, 0.2)]
    assert pareto(points) == [4, 0, 1]


def test_records_survive_a_torn_line_and_resume_keys(tmp_path: Path) -> None:
    with RecordWriter(tmp_path) as w:
        w.write(rec("a", "low", "", "correct"))
        w.write(rec("b", "high", "single", "wrong", candidates=[("1", True)]))
    with (tmp_path / "records.jsonl").open("a") as f:
        f.write('{"run_id": "r", "problem')  # killed mid-write
    back = list(iter_records(tmp_path))
    assert [r.problem_id for r in back] == ["a", "b"]
    assert back[1].candidates == [("1", True)]
    assert done_keys(tmp_path) == {("a", "low", "", 0), ("b", "high", "single", 0)}
    write_run_meta(tmp_path, {"model": "m"})
    assert read_run_meta(tmp_path)["model"] == "m"


def test_compare_reports_deltas() -> None:
    base = build_rows([rec("a", "low", "", "wrong")], Pricing())
    new = build_rows([rec("a", "low", "", "correct")], Pricing())
    diff = compare(base, new)
    assert diff[-1]["selected"] == (0.0, 1.0, 1.0)


def test_report_page_is_self_contained(tmp_path: Path) -> None:
    records = [
        rec("a", "low", "", "correct", tokens=100, latency=1.0),
        rec("a", "high", "self_consistency:n=4", "correct", tokens=400, latency=3.0, level=2),
        rec("b", "medium", "single", "wrong", tokens=150, latency=1.5, level=3),
    ]
    rows = build_rows(records, Pricing())
    page = write_report(tmp_path, "t", rows, totals(records), {"model": "m"})
    text = page.read_text()
    assert "<svg" in text and "<table" in text
    for external in ('src="http', 'href="http', "url(http", "<script src", '<link rel="stylesheet'):
        assert external not in text  # nothing loaded from the network
    assert (tmp_path / "pareto_tokens.png").read_bytes()[:4] == b"\x89PNG"
    assert len(json.loads((tmp_path / "rows.json").read_text())) == len(rows)
