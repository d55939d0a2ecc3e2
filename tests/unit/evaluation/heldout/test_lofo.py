"""Leave-one-family-out summaries: priced rows averaged with their interval, unpriced ones
counted and never scored, candidates and tokens as mean and spread, and the paired difference
against in-family rows on the problems both price."""

from __future__ import annotations

from typing import Any

import pytest

from evaluation.heldout.lofo import by_effort, candidates_of, paired_difference, summarize, with_candidates
from evaluation.stats.intervals import bootstrap_interval


def row(pid: str, **efforts: dict[str, Any]) -> dict[str, Any]:
    return {"id": pid, "family": "chain_sum", "kind": "arithmetic", "task_type": "arithmetic", "efforts": efforts}


def priced(config: str, accuracy: float, generated: float, candidates: int = 1) -> dict[str, Any]:
    return {"config": config, "priced": True, "accuracy": accuracy, "generated_tokens": generated,
            "candidates": candidates}  # fmt: skip


def unpriced(config: str, candidates: int) -> dict[str, Any]:
    return {"config": config, "priced": False, "candidates": candidates}


def test_candidates_count_the_routes_n_and_a_hybrids_chains_of_thought() -> None:
    assert candidates_of({"strategy": "single", "n": 1, "params": {"greedy": True}}) == 1
    assert candidates_of({"strategy": "program_of_thought", "n": 4, "params": {"mode": "hybrid", "cot": 2}}) == 6
    assert candidates_of({"strategy": "self_consistency", "n": 5, "params": None}) == 5


def test_with_candidates_adds_each_efforts_route_and_leaves_the_rows_alone() -> None:
    rows = [row("p1", none={"config": "greedy", "priced": True}, high={"config": "pot@4", "priced": True})]
    routes: dict[str, dict[str, dict[str, Any]]] = {"none": {"p1": {"n": 1}}, "high": {"p1": {"n": 4, "params": {}}}}
    out = with_candidates(rows, routes)
    assert out[0]["efforts"]["none"]["candidates"] == 1 and out[0]["efforts"]["high"]["candidates"] == 4
    assert "candidates" not in rows[0]["efforts"]["none"]


def test_with_candidates_keeps_what_the_pricing_replayed_over_the_routes_cap() -> None:
    replayed = {"config": "adaptive@8:program:other,more:w0.5:c0.9", "priced": True, "candidates": 2.5}
    rows = [row("p1", high=replayed)]
    out = with_candidates(rows, {"high": {"p1": {"strategy": "adaptive", "n": 8, "params": {}}}})
    assert out[0]["efforts"]["high"]["candidates"] == 2.5  # drawn before it settled, not the cap of 8


def test_unpriced_routes_are_counted_not_scored_and_their_candidates_still_count() -> None:
    rows = [row("p1", high=priced("pot@1", 1.0, 10.0)), row("p2", high=priced("pot@1", 0.5, 30.0)),
            row("p3", high=unpriced("beam@4", 4))]  # fmt: skip
    s = summarize(rows, "high")
    assert (s.problems, s.priced, s.unpriced) == (3, 2, 1)
    assert s.accuracy == pytest.approx(0.75) and s.interval == bootstrap_interval([1.0, 0.5])
    assert s.generated_tokens.mean == pytest.approx(20.0) and s.generated_tokens.sd == pytest.approx(10.0)
    assert s.candidates.mean == pytest.approx(2.0)  # 1, 1, 4
    assert s.configs == {"pot@1": 2, "beam@4": 1}
    assert s.as_dict()["unpriced"] == 1


def test_an_effort_with_nothing_priced_has_no_accuracy_rather_than_zero() -> None:
    s = summarize([row("p1", high=unpriced("pot@3", 3))], "high")
    assert s.accuracy is None and s.interval is None and s.generated_tokens.mean is None
    assert by_effort([row("p1", high=unpriced("pot@3", 3))], ["high"])["high"].problems == 1


def test_rows_without_candidates_summarize_without_them() -> None:
    committed = [row("p1", high={"config": "greedy", "priced": True, "accuracy": 1.0, "generated_tokens": 5.0})]
    s = summarize(committed, "high")
    assert s.accuracy == 1.0 and s.candidates.mean is None


def test_the_paired_difference_is_left_out_minus_in_family_on_problems_both_price() -> None:
    left_out = [row("p1", high=priced("a", 0.0, 1)), row("p2", high=priced("a", 1.0, 1)),
                row("p3", high=unpriced("b", 2))]  # fmt: skip
    in_family = [row("p1", high=priced("c", 1.0, 1)), row("p2", high=priced("c", 1.0, 1)),
                 row("p3", high=priced("c", 1.0, 1)), row("p9", high=priced("c", 0.0, 1))]  # fmt: skip
    d = paired_difference(left_out, in_family, "high")
    assert d.problems == 2 and d.difference == pytest.approx(-0.5)
    assert d.interval is not None and d.interval[0] <= -0.5 <= d.interval[1]
    assert paired_difference(left_out, [], "high").difference is None
