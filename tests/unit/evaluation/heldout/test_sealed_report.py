"""The sealed split's plan, grade and report: the committed split grades its own references right,
a tampered split is refused, and the report counts what it says (errors apart, missing pairs
named, paired differences, the step and first-wave checks, confidence per strategy)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from evaluation.heldout.sealed_grade import grade, readings
from evaluation.heldout.sealed_markdown import markdown
from evaluation.heldout.sealed_plan import SplitMismatch, check_split, interleaved, pending
from evaluation.heldout.sealed_report import FIRST_WAVE, UNKNOWN_KIND, report
from evaluation.problems.sealed import SealedProblem, load_sealed, sealed_hashes, text_hash

EFFORTS = ["none", "low", "high"]


def problem(i: int, family: str = "fa") -> SealedProblem:
    return SealedProblem(f"sealed:{family}:{i}", family, f"question {family} {i}?", "1", "{}")


def rec(p: SealedProblem, effort: str, correct: bool | None, kind: str = "open", **extra: Any) -> dict[str, Any]:
    """A record as ``sealed run`` writes it; ``correct=None`` is an infrastructure error."""
    base: dict[str, Any] = {
        "problem_id": p.id, "family": p.family, "effort": effort, "task_kind": kind, "strategy": "single",
        "candidates": 1, "completion_tokens": 100, "prompt_tokens": 40, "latency_s": 2.0, "confidence": None,
        "error": "", "error_kind": "", "answer": "1" if correct else "2", "ttc": {},
        "grade": None if correct is None else float(correct), "correct": correct,
    }  # fmt: skip
    if correct is None:
        base |= {"error": "APIConnectionError: refused", "error_kind": "connection", "task_kind": None}
    return base | extra


# ---------------------------------------------------------------------------------- plan, grade


def test_every_committed_reference_grades_right_and_nonsense_does_not() -> None:
    problems = load_sealed()
    assert len(problems) == 250
    check_split(problems, sealed_hashes())
    for p in problems:
        assert grade(p, p.reference).correct, p.id
        assert not grade(p, "I cannot tell.").correct, p.id


def test_a_reply_is_read_as_content_stated_answer_or_fenced_block() -> None:
    p = next(p for p in load_sealed() if p.family == "simple_geometry")
    assert grade(p, f"The angles sum to 360.\nThe answer is {p.reference}.").correct
    assert grade(p, f"```\n{p.reference}\n```").correct
    assert readings("  42 ") == ["42"]
    assert grade(p, "The answer is 1.").score < 1.0


def test_partial_credit_is_not_right() -> None:
    roots = next(p for p in load_sealed() if p.family == "polynomial_equations")
    near = roots.reference[:-1] + ("0" if roots.reference[-1] != "0" else "1")  # the 4th decimal off
    verdict = grade(roots, near)
    assert 0.9 < verdict.score < 1.0 and not verdict.correct


def test_a_split_whose_questions_changed_is_refused() -> None:
    problems = [problem(i) for i in range(3)]
    hashes = [text_hash(p.question) for p in problems]
    check_split(problems, hashes)
    with pytest.raises(SplitMismatch, match="1 not in the committed list"):
        check_split([*problems[:2], problem(9)], hashes)
    with pytest.raises(SplitMismatch):
        check_split(problems[:2], hashes)


def test_problems_go_round_robin_over_families_and_pending_skips_what_is_recorded() -> None:
    problems = [problem(0, "fa"), problem(1, "fa"), problem(0, "fb")]
    order = interleaved(problems)
    assert [p.id for p in order] == ["sealed:fa:0", "sealed:fb:0", "sealed:fa:1"]
    records = [rec(order[0], "none", True), rec(order[0], "low", None)]
    todo = pending(order, ["none", "low"], records)
    assert [(p.id, e) for p, e in todo] == [("sealed:fb:0", "none"), ("sealed:fb:0", "low"),
                                           ("sealed:fa:1", "none"), ("sealed:fa:1", "low")]  # fmt: skip
    again = pending(order, ["none", "low"], records, retry_errors=True)
    assert again[0] == (order[0], "low")


# ---------------------------------------------------------------------------------- report


def test_accuracy_excludes_errors_and_a_partial_run_says_what_is_missing() -> None:
    problems = [problem(i) for i in range(10)]
    records = [rec(p, "none", i < 3) for i, p in enumerate(problems)]
    records += [rec(p, "low", None if i == 0 else i < 6) for i, p in enumerate(problems)]
    records += [rec(p, "high", True) for p in problems[:5]]
    body = report("r1", problems, EFFORTS, records, [])
    low = body["per_effort"]["low"]
    assert (low["answered"], low["right"], low["errors"], low["missing"]) == (9, 5, 1, 0)
    assert low["accuracy"] == pytest.approx(5 / 9) and low["coverage"] == pytest.approx(0.9)
    assert low["interval"][0] < 5 / 9 < low["interval"][1]
    assert body["missing"] == {"none": 0, "low": 0, "high": 5}
    assert body["errors"] == {"connection": 1}
    text = markdown(body)
    assert "Partial run: 5 of 30" in text and "connection" in text


def test_a_retried_record_replaces_the_error_it_followed() -> None:
    p = problem(0)
    body = report("r", [p], ["low"], [rec(p, "low", None), rec(p, "low", True)], [])
    assert body["per_effort"]["low"]["answered"] == 1 and body["errors"] == {}


def test_high_minus_low_is_paired_on_problems_both_answered() -> None:
    problems = [problem(i) for i in range(40)]
    records = [rec(p, "low", i < 10) for i, p in enumerate(problems)]
    records += [rec(p, "high", i < 30) for i, p in enumerate(problems)]
    records[0] = rec(problems[0], "low", None)  # not paired: low failed
    body = report("r", problems, ["low", "high"], records, [])
    diff = body["high_minus_low"]
    assert diff["problems"] == 39
    assert diff["difference"] == pytest.approx(20 / 39)
    assert 0 < diff["interval"][0] < diff["difference"] < diff["interval"][1]
    assert body["checks"][0]["passed"]


def test_a_step_down_counts_only_in_kinds_with_twenty_problems() -> None:
    big = [problem(i, "fa") for i in range(20)]
    small = [problem(i, "fb") for i in range(5)]
    records = []
    for i, p in enumerate(big):  # arithmetic: low 15/20, high 14/20, a 5-point step down
        records += [rec(p, "low", i < 15, "arithmetic"), rec(p, "high", i < 14, "arithmetic")]
    for p in small:  # code: a big step down, but too few problems to judge
        records += [rec(p, "low", True, "code"), rec(p, "high", False, "code")]
    body = report("r", big + small, ["low", "high"], records, [])
    step = body["checks"][1]
    assert not step["passed"] and "arithmetic low->high -5.0" in step["detail"]
    assert "not judged (fewer problems): code" in step["detail"]
    records = [r for r in records if not (r["effort"] == "high" and r["task_kind"] == "arithmetic")]
    records += [rec(p, "high", i < 15, "arithmetic") for i, p in enumerate(big)]
    assert report("r", big + small, ["low", "high"], records, [])["checks"][1]["passed"]
    assert set(body["per_kind"]) == {"arithmetic", "code"}


def test_a_problem_with_no_answer_has_no_known_kind() -> None:
    p = problem(0)
    body = report("r", [p], ["low"], [rec(p, "low", None)], [])
    assert set(body["per_kind"]) == {UNKNOWN_KIND}


def test_the_first_wave_check_reads_the_kept_ttc_object_or_says_it_cannot() -> None:
    problems = [problem(i) for i in range(4)]
    plain = [rec(p, "high", True, candidates=3) for p in problems]
    check = report("r", problems, ["high"], plain, [])["checks"][2]
    assert not check["passed"] and "not measurable" in check["detail"]
    waves = [{"size": 3, "agreed": True}, {"size": 3, "agreed": True}, {"size": 3, "agreed": False}, None]
    found = [r | {"ttc": {FIRST_WAVE: w}} if w else r for r, w in zip(plain, waves, strict=True)]
    found[2]["candidates"] = 12  # disagreed: it may draw more
    body = report("r", problems, ["high"], found, [])
    assert body["checks"][2]["passed"] and body["first_wave"]["agreed"] == 2
    found[0]["candidates"] = 6
    assert not report("r", problems, ["high"], found, [])["checks"][2]["passed"]


def test_confidence_is_scored_per_strategy_with_an_interval_and_a_reliability_table() -> None:
    problems = [problem(i) for i in range(30)]
    records = [rec(p, "high", i % 3 != 0, strategy="self_consistency", confidence=0.95) for i, p in enumerate(problems)]
    records += [rec(p, "none", False) for p in problems]  # single: no confidence served
    body = report("r", problems, ["none", "high"], records, [])
    vote = body["confidence"]["per_strategy"]["self_consistency"]
    assert vote["ece"] == pytest.approx(0.95 - 20 / 30)
    low, high = vote["interval"]
    assert low <= vote["ece"] <= high
    assert [b["answers"] for b in vote["reliability"] if b["answers"]] == [30]
    assert body["confidence"]["per_strategy"]["single"]["without_confidence"] == 30
    assert "Reliability of `self_consistency`" in markdown(body)


def test_the_headers_give_provenance_and_the_report_is_json() -> None:
    problems = [problem(0)]
    shas = {"model_sha256": "m" * 64, "table_sha256": "t" * 64}
    headers = [
        shas | {"git_describe": "abc", "started_at": "2026-12-08T10:00:00Z", "ended_at": "2026-12-08T10:05:00Z",
                "load_average_start": [1.5, 1, 1], "load_average_end": [2.5, 1, 1]},
        shas | {"git_describe": "abd", "started_at": "2026-12-08T10:05:00Z", "ended_at": "2026-12-08T10:09:00Z",
                "load_average_start": [0.5, 1, 1], "load_average_end": [1.0, 1, 1]},
    ]  # fmt: skip
    body = report("r", problems, ["low"], [rec(problems[0], "low", True)], headers)
    assert body["code_revisions"] == ["abc", "abd"] and body["load_average_1min"]["max"] == 2.5
    assert (body["started_at"], body["ended_at"]) == ("2026-12-08T10:00:00Z", "2026-12-08T10:09:00Z")
    json.dumps(body)
    assert "Complete: every one of 1" in markdown(body)
