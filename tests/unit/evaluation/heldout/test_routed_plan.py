"""The routed held-out runner's pure parts: grouping, route checks, outcomes, resume, report."""

from __future__ import annotations

from typing import Any

from calibration.lib.routed_report import report
from evaluation.heldout.checks import all_checks
from evaluation.heldout.routed_plan import (
    PlannedRequest,
    adoptable,
    error_counts,
    group_efforts,
    outcomes,
    pending,
    provenance_hash,
    route_mismatch,
    served_calibration,
    summaries,
)

EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]
GREEDY = {"strategy": "single", "n": 1, "token_budget": 512, "params": {"greedy": True}}
SC4 = {"strategy": "self_consistency", "n": 4, "token_budget": 2048, "params": {"early_stop": False}}
SC8 = {"strategy": "self_consistency", "n": 8, "token_budget": 4096, "params": {"early_stop": False}}


def routes(*picks: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(zip(EFFORTS, picks, strict=True))


def record(pid: str, efforts: list[str], correct: bool | None, kind: str = "arithmetic", **kw: Any) -> dict[str, Any]:
    base = {"problem_id": pid, "kind": kind, "efforts": efforts, "route": SC4, "correct": correct,
            "completion_tokens": 100, "prompt_tokens": 50, "latency_s": 1.0, "error": "", "error_kind": ""}  # fmt: skip
    return base | kw


def test_efforts_with_one_route_share_one_request_at_the_lowest() -> None:
    plan = group_efforts("p", routes(GREEDY, GREEDY, SC4, SC4, SC8, SC8), EFFORTS)
    assert [(r.effort, r.efforts) for r in plan] == [
        ("none", ("none", "minimal")), ("low", ("low", "medium")), ("high", ("high", "xhigh"))]  # fmt: skip
    assert plan[1].route == SC4


def test_token_budget_alone_does_not_split_a_group_but_params_do() -> None:
    bigger = SC4 | {"token_budget": 9999}
    stopped = SC4 | {"params": {"early_stop": True}}
    assert len(group_efforts("p", routes(GREEDY, GREEDY, SC4, bigger, bigger, bigger), EFFORTS)) == 2
    assert len(group_efforts("p", routes(GREEDY, GREEDY, SC4, stopped, stopped, stopped), EFFORTS)) == 3


def test_route_mismatch_names_strategy_n_effort_and_fallback() -> None:
    ok = {"strategy": "self_consistency", "n": 4, "effort_applied": "low"}
    assert route_mismatch(SC4, "low", ok) == ""
    assert "strategy" in route_mismatch(SC4, "low", ok | {"strategy": "single"})
    assert "n=3" in route_mismatch(SC4, "low", ok | {"n": 3})
    assert "effort applied" in route_mismatch(SC4, "low", ok | {"effort_applied": "minimal"})
    assert "fallback" in route_mismatch(SC4, "low", ok | {"strategy_fallback": {"applied": "single"}})


def test_outcomes_spread_a_request_over_its_efforts_and_errors_are_never_wrong() -> None:
    found = outcomes([
        record("a", ["low", "medium"], True),
        record("b", ["low"], None, error="boom", error_kind="timeout"),
        record("c", ["low"], None, error="routed otherwise", error_kind="route"),
    ])  # fmt: skip
    assert found[("a", "medium")].correct is True and found[("a", "low")].config == "self_consistency@4"
    assert found[("b", "low")].correct is None
    rows = summaries(found, ["low", "medium"])
    assert rows["all"]["low"].problems == 1 and rows["all"]["low"].accuracy == 1.0
    assert rows["all"]["low"].unpriced == 2
    assert rows["all"]["low"].cost == 100 + 0.25 * 50  # priced as the offline rows: generated + 0.25 x prompt
    assert error_counts(found) == {"route": 1, "timeout": 1}


def test_pending_resumes_only_the_efforts_no_record_stands_for() -> None:
    plan = [PlannedRequest("a", "low", ("low", "medium", "high"), SC4), PlannedRequest("b", "none", ("none",), GREEDY)]
    records = [record("a", ["low"], True), record("b", ["none"], None, error="x", error_kind="timeout")]
    todo = pending(plan, records)
    assert [(r.problem_id, r.effort, r.efforts) for r in todo] == [("a", "medium", ("medium", "high"))]
    retried = pending(plan, records, retry_errors=True)
    assert [r.problem_id for r in retried] == ["a", "b"]
    routing = [record("b", ["none"], None, error="x", error_kind="route")]
    assert [r.problem_id for r in pending(plan[1:], routing, retry_errors=True)] == []


def ladder_records(high_right: int, n: int = 20) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        out.append(record(f"p{i}", ["none", "minimal", "low"], i < 2))
        out.append(record(f"p{i}", ["medium", "high", "xhigh"], i < high_right))
    return out


def test_report_checks_pass_and_miss_on_hand_built_records() -> None:
    found = outcomes(ladder_records(high_right=20))
    rows = summaries(found, EFFORTS)
    checks = {c.name: c for c in all_checks({g: {"routed": r} for g, r in rows.items()}, EFFORTS, 20, None, [])}
    assert next(c for n, c in checks.items() if n.startswith("high >= none")).passed
    assert not next(c for n, c in checks.items() if n.startswith(">= 200")).passed
    flat = summaries(outcomes(ladder_records(high_right=3)), EFFORTS)
    misses = all_checks({g: {"routed": r} for g, r in flat.items()}, EFFORTS, 20, None, [])
    assert not next(c for c in misses if c.name.startswith("high >= none")).passed


def test_report_body_without_a_fit_has_live_rows_and_no_offline_figure() -> None:
    body = report(ladder_records(high_right=20), EFFORTS, [{"git_describe": "v1"}], None, [])
    assert body["offline"] == {} and body["live"]["all"]["high"]["accuracy"] == 1.0
    assert "**pass**: high >= none" in body["markdown"]
    # no best fixed configuration is known without the fit: that check cannot pass
    assert not next(c for c in body["checks"] if c["name"].startswith("per task kind: routed within"))["passed"]


def test_provenance_hash_ignores_key_order() -> None:
    assert provenance_hash({"a": 1, "b": [2]}) == provenance_hash({"b": [2], "a": 1}) != provenance_hash({"a": 2})


def test_served_confidence_is_scored_once_per_answer_and_errors_or_missing_confidence_apart() -> None:
    records = [
        record("a", ["low", "medium"], True, confidence=0.9),  # one answer for two efforts: counted once
        record("b", ["low"], False, confidence=0.9),
        record("c", ["low"], True, confidence=None),  # no vote to read: counted apart
        record("d", ["low"], None, error="boom", error_kind="timeout", confidence=0.5),  # no answer
    ]
    served = served_calibration(records, resamples=200)
    assert (served["answers"], served["scored"], served["without_confidence"], served["problems"]) == (3, 2, 1, 2)
    assert abs(served["ece"] - 0.4) < 1e-9  # one bin: mean confidence 0.9 against accuracy 0.5
    low, high = served["interval"]
    assert 0.0 <= low <= served["ece"] <= high <= 1.0
    superseded = [record("a", ["low"], False, confidence=0.2), record("a", ["low"], True, confidence=0.8)]
    assert served_calibration(superseded, resamples=10)["scored"] == 1  # the newest record stands
    assert served_calibration([record("c", ["low"], True)])["ece"] is None


def test_report_states_the_served_confidence_when_measured() -> None:
    records = [*ladder_records(high_right=20), record("a", ["low"], True, confidence=0.7)]  # one carries one
    body = report(records, EFFORTS, [{"git_describe": "v1"}], None, [])
    assert body["served_confidence"]["scored"] == 1
    assert "Served `ttc.confidence` on these answers: ECE 0.300" in body["markdown"]


def test_another_runs_records_stand_only_where_the_route_is_the_same_and_answered() -> None:
    plan = group_efforts("p", routes(GREEDY, GREEDY, SC4, SC4, SC8, SC8), EFFORTS)
    other = [
        record("p", ["none", "minimal", "low"], True, route=GREEDY),  # low is SC4 here: not adopted for it
        record("p", ["medium"], False, route=SC4 | {"token_budget": 9}),  # budget alone: same configuration
        record("p", ["high", "xhigh"], None, route=SC8, error="timeout", error_kind="timeout"),  # sent again
        record("q", ["none"], True, route=GREEDY),  # another problem
    ]
    adopted = adoptable(plan, other, "routed/old")
    assert [(r["efforts"], r["correct"]) for r in adopted] == [(["none", "minimal"], True), (["medium"], False)]
    assert {r["adopted_from"] for r in adopted} == {"routed/old"}
    assert [(r.effort, r.efforts) for r in pending(plan, adopted)] == [("low", ("low",)), ("high", ("high", "xhigh"))]


def test_adopted_answers_are_not_scored_for_the_served_confidence() -> None:
    records = [record(f"p{i}", ["low"], i % 2 == 0, confidence=0.5) for i in range(6)]
    records += [record("old", ["low"], True, confidence=0.1, adopted_from="routed/old")]
    served = served_calibration(records, resamples=50)
    assert (served["scored"], served["adopted"]) == (6, 1)
    assert abs(served["accuracy"] - 0.5) < 1e-9
