"""The simulator check: priced configurations mapped to pinned requests, and live records
compared with pool estimates (agreement, disagreement, infrastructure errors excluded)."""

from __future__ import annotations

import pytest

from evaluation.heldout.simulator_check import compare, markdown, paired_interval, report
from evaluation.pricing.live_records import LiveRecord, Unmappable, gateway_pin, latest_records
from evaluation.pricing.pricer import Config, Estimate, LatencyModel, Pricer
from tests.unit.evaluation.pool_fixtures import draw, pool

SETTINGS = {"temperature": 0.7, "top_p": 1.0, "cot_max_tokens": 1024, "program_max_tokens": 512}


def test_program_of_thought_is_pinned_to_draw_what_the_pricer_replays() -> None:
    pin = gateway_pin(Config("pot@4", "pot", 4), SETTINGS)
    assert (pin.strategy, pin.n, pin.temperature, pin.max_tokens) == ("program_of_thought", 4, 0.7, 1024)
    # No early stop and no resampled programs (the pools hold neither); the greedy chain of
    # thought answers when no program does, as the pricer's fallback.
    assert pin.params == {"mode": "program", "early_stop": False, "retries": 0, "fallback": True}
    assert pin.token_budget == 4 * 512 + 1024
    assert pin.extension() == {"strategy": "program_of_thought", "n": 4, "token_budget": 3072, "params": pin.params}


def test_early_stopped_and_hybrid_and_vote_pins() -> None:
    es = gateway_pin(Config("sc@6:es", "sc", 6, early_stop=True), SETTINGS, confidence=0.8)
    assert es.strategy == "self_consistency" and es.params == {"early_stop": True, "first_wave": 3, "confidence": 0.8}
    assert es.token_budget == 6 * 1024
    hybrid = gateway_pin(Config("hybrid@4+cot2", "pot", 4, cot=2), SETTINGS)
    assert hybrid.params["mode"] == "hybrid" and hybrid.params["cot"] == 2 and hybrid.params["cot_weight"] == 0.5
    assert gateway_pin(Config("cot_greedy", "cot_greedy"), SETTINGS).params == {"greedy": True}


@pytest.mark.parametrize(
    ("config", "settings", "says"),
    [
        (Config("bon@4:prm", "bon", 4, judge="prm"), SETTINGS, "no pinned gateway request"),
        (Config("code_vote@4", "code_vote", 4), SETTINGS, "no pinned gateway request"),
        (Config("pot@4", "pot", 4), {**SETTINGS, "program_max_tokens": 96}, "capped at 96"),
        (Config("sc@4", "sc", 4), {**SETTINGS, "top_p": 0.9}, "top_p"),
        (Config("sc@4:es", "sc", 4, early_stop=True, first_wave=2), SETTINGS, "first_wave"),
    ],
)
def test_a_configuration_no_request_replays_is_refused(config: Config, settings: dict[str, float], says: str) -> None:
    with pytest.raises(Unmappable, match=says):
        gateway_pin(config, settings)


def _estimates(accuracies: list[float], generated: float = 100.0) -> dict[str, Estimate]:
    return {f"p{i}": Estimate(a, generated, 50.0, 2.0) for i, a in enumerate(accuracies)}


def _records(config: str, verdicts: list[bool | None], tokens: int = 120) -> list[LiveRecord]:
    return [
        LiveRecord(f"p{i}", config, v, tokens, 60, 3.0, error="" if v is not None else "timeout", error_kind="")
        for i, v in enumerate(verdicts)
    ]


def test_live_accuracy_inside_the_priced_interval_agrees() -> None:
    estimates = _estimates([0.75] * 20)
    check = compare("sc@4", estimates, _records("sc@4", [True] * 15 + [False] * 5))
    assert check.problems == 20 and check.errors == 0
    assert check.live_accuracy == pytest.approx(0.75) and check.priced_accuracy == pytest.approx(0.75)
    assert check.priced_low <= 0.75 <= check.priced_high and check.verdict == "agrees"
    assert check.difference == pytest.approx(0.0) and not check.paired_excludes_zero
    assert check.live_low < 0.75 < check.live_high  # Wilson around the live proportion
    assert (check.live_generated, check.priced_generated) == (120.0, 100.0)
    assert (check.live_latency_s, check.priced_latency_s) == (3.0, 2.0)


def test_a_live_run_far_from_the_estimate_disagrees_and_the_paired_interval_says_so() -> None:
    estimates = _estimates([0.9] * 30)
    check = compare("pot@4", estimates, _records("pot@4", [True] * 9 + [False] * 21))
    assert check.live_accuracy == pytest.approx(0.3)
    assert check.live_accuracy < check.priced_low and check.verdict == "disagrees" and not check.agrees
    assert check.difference == pytest.approx(-0.6) and check.difference_high < 0 and check.paired_excludes_zero


def test_infrastructure_errors_are_excluded_never_wrong() -> None:
    estimates = _estimates([1.0] * 10)
    records = _records("pot@1", [True] * 6 + [None] * 4)
    check = compare("pot@1", estimates, records)
    assert (check.problems, check.errors) == (6, 4)
    assert check.live_accuracy == 1.0 and check.verdict == "agrees"
    # An error is excluded even when it says correct: the check did not run.
    flagged = [LiveRecord("p0", "pot@1", True, error="sandbox: down")]
    assert compare("pot@1", estimates, flagged).errors == 1


def test_the_newest_record_of_a_pair_counts_and_problems_without_estimates_are_counted_apart() -> None:
    older = LiveRecord("p0", "sc@4", None, error="connection")
    newer = LiveRecord("p0", "sc@4", False)
    assert latest_records([older, newer])[("p0", "sc@4")] is newer
    check = compare("sc@4", _estimates([0.0]), [older, newer, LiveRecord("elsewhere", "sc@4", True)])
    assert (check.problems, check.errors, check.unpriced) == (1, 0, 1)


def test_report_compares_on_the_same_problems_the_pricer_prices() -> None:
    # Two hand-built pools: p0's sampled chains of thought are all right, p1's all wrong, so
    # sc@2 is priced 1.0 and 0.0; live answers right on both (p1 off the estimate).
    pools = [
        pool("p0", cot=draw("cot", ("1", True), [("1", True)] * 3)),
        pool("p1", cot=draw("cot", ("2", False), [("2", False)] * 3)),
    ]
    pricer = Pricer(LatencyModel(0.0, 0.01, 0.0))
    config = Config("sc@2", "sc", 2)
    priced = {"sc@2": {p.id: est for p in pools if (est := pricer.estimate(p, config)) is not None}}
    assert [e.accuracy for e in priced["sc@2"].values()] == [1.0, 0.0]
    checks = report(["sc@2", "pot@1"], priced, [LiveRecord("p0", "sc@2", True), LiveRecord("p1", "sc@2", True)])
    assert checks[0].problems == 2 and checks[0].priced_accuracy == 0.5 and checks[0].live_accuracy == 1.0
    assert checks[1].verdict == "no data"
    table = markdown(checks)
    assert "`sc@2` | 2 | 0 | 1.000" in table and "| no data |" in table


def test_paired_interval_brackets_the_mean_difference() -> None:
    low, high = paired_interval([0.5, -0.5, 0.25, 0.0] * 10, seed=1)
    assert low < 0.0625 < high
    assert paired_interval([]) == (0.0, 0.0)
