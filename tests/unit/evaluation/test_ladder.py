"""The effort-ladder sheet: routed outcomes, intervals, ledgers, monotonicity."""

from __future__ import annotations

from evaluation.ladder import effort_rows, ladder_row, monotone
from evaluation.records import RequestRecord


def record(pid: str, label: str, correct: bool | None, *, tokens: int = 100, outcome: str = "") -> RequestRecord:
    return RequestRecord(
        run_id="r", problem_id=pid, dataset="chain_sum", level=1, split="heldout", sample=0,
        effort_requested="medium", strategy_pinned=label,
        outcome=outcome or ("correct" if correct else "wrong"),  # type: ignore[arg-type]
        correct=correct, answer="1", completion_tokens=tokens, prompt_tokens=50, latency_s=1.0,
        candidates=[("1", bool(correct)), ("2", False)],
    )  # fmt: skip


def test_infrastructure_failures_are_not_wrong_answers() -> None:
    rows = [record("a", "x", True), record("b", "x", False), record("c", "x", None, outcome="error")]
    row = ladder_row("x", rows)
    assert (row.correct, row.problems, row.failures) == (1, 2, 1)
    assert row.accuracy == 0.5
    assert row.ledger["coverage"] == 0.5 and row.ledger["pass_at_1"] == 0.25


def test_effort_rows_score_each_problem_by_its_routed_configuration() -> None:
    measured = {
        ("a", "single"): record("a", "single", False, tokens=200),
        ("a", "pot"): record("a", "pot", True, tokens=50),
        ("b", "single"): record("b", "single", True, tokens=180),
        ("b", "pot"): record("b", "pot", True, tokens=40),
    }
    chosen = {"none": {"a": "single", "b": "single"}, "low": {"a": "pot", "b": "pot"}, "high": {"a": "sc9", "b": "pot"}}
    rows, missing = effort_rows(chosen, measured)
    assert [r.name for r in rows] == ["none", "low", "high"]
    assert rows[0].accuracy == 0.5 and rows[0].generated_tokens == 190
    assert rows[1].accuracy == 1.0 and rows[1].generated_tokens == 45
    assert missing == ["high/a/sc9"]  # routed to a configuration nobody measured: reported, not guessed
    assert monotone(rows[:2]) and not monotone([rows[1], rows[0]])
