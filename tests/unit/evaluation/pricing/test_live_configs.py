"""Live (sequential and tree) configurations: names to pinned requests and routes, records to
estimates (errors excluded), the stratified subset, the difference estimator by hand, and the
route fit choosing a live configuration only when it is best within budget."""

from __future__ import annotations

import pytest

from evaluation.pricing.live_configs import LIVE_CONFIGS, UnknownLive, live_estimates, live_pin, live_route, stratified
from evaluation.pricing.live_records import LiveRecord
from evaluation.pricing.pricer import Estimate
from evaluation.routing.live_join import LiveSet, impute
from evaluation.routing.route_fit import GREEDY, Fit, fit
from evaluation.routing.types import ConfigStats, ProblemStats
from services.gateway.routing import Route
from services.search.strategies import REGISTRY, build
from services.search.strategies.config import Sampling, StrategyInput
from tests.unit.evaluation.routing.test_route_fit import FREE, configs, text_pool

SETTINGS = {"temperature": 0.7, "cot_max_tokens": 100}


def test_every_live_name_pins_a_registered_strategy_with_the_pools_sampling() -> None:
    for name, spec in LIVE_CONFIGS.items():
        pin = live_pin(name, SETTINGS)
        assert pin.strategy in REGISTRY and pin.n == spec.n
        assert (pin.temperature, pin.max_tokens, pin.token_budget) == (0.7, 100, spec.caps * 100)
        Route.model_validate(live_route(name, SETTINGS))
    assert live_pin("beam@4", SETTINGS).extension() == {
        "strategy": "beam_search", "n": 4, "token_budget": 600, "params": {"max_steps": 6}}  # fmt: skip
    with pytest.raises(UnknownLive):
        live_pin("beam@5", SETTINGS)


def test_every_live_pin_is_a_strategy_configuration_the_orchestrator_accepts() -> None:
    """The strategies validate their parameters (unknown keys refused): each pin builds."""
    for name in LIVE_CONFIGS:
        pin = live_pin(name, SETTINGS)
        sampling = Sampling(temperature=pin.temperature, max_tokens=pin.max_tokens)
        assert build(pin.strategy, StrategyInput(n=pin.n, params=pin.params, sampling=sampling)).name == pin.strategy


def test_records_become_estimates_and_errors_are_excluded_not_wrong() -> None:
    records = [
        LiveRecord("p1", "beam@4", False, 10, 5, 1.0),
        LiveRecord("p1", "beam@4", True, 20, 6, 2.0),  # newer: it counts
        LiveRecord("p2", "beam@4", None, error="timeout", error_kind="timeout"),
        LiveRecord("p3", "beam@4", False, 30, 7, 3.0),
    ]
    est = live_estimates(records, ["beam@4", "mcts@8"])
    assert set(est) == {"beam@4"} and set(est["beam@4"]) == {"p1", "p3"}
    e = est["beam@4"]["p1"]
    assert (e.accuracy, e.generated, e.prompt, e.latency_s) == (1.0, 20.0, 6.0, 2.0)
    assert est["beam@4"]["p3"].accuracy == 0.0


def test_the_subset_is_round_robin_over_families_in_draw_order() -> None:
    pools = [text_pool(pid, family=fam) for pid, fam in
             [("a1", "a"), ("a2", "a"), ("a3", "a"), ("b1", "b"), ("c1", "c"), ("c2", "c")]]  # fmt: skip
    assert [p.id for p in stratified(pools, 4)] == ["a1", "b1", "c1", "a2"]
    assert [p.id for p in stratified(pools, 0)] == ["a1", "b1", "c1", "a2", "c2", "a3"]


def _stats(pid: str, greedy: tuple[float, float], live: tuple[float, float] | None) -> ProblemStats:
    st = ProblemStats(pid, pid, 1)
    st.configs[GREEDY] = ConfigStats(greedy[0], greedy[1], 1, 0.0, greedy[1])
    if live is not None:
        st.configs["beam@4"] = ConfigStats(live[0], live[1], 1, 0.0, live[1])
    return st


def test_the_difference_estimator_by_hand() -> None:
    """Family f: live measured on p1..p3 with differences +1, 0, +1 (mean 2/3) and tokens 300,
    200, 400 against greedy's 100 each (ratio 3); on p4 (greedy 0.5 right, 50 tokens) it is
    min(1, 0.5 + 2/3) = 1 and 150 tokens. q2's family g has one measured problem (< 3), so it
    is imputed from the task type t, which holds all four measured problems."""
    stats = [_stats("p1", (0.0, 100), (1.0, 300)), _stats("p2", (1.0, 100), (1.0, 200)),
             _stats("p3", (0.0, 100), (1.0, 400)), _stats("p4", (0.5, 50), None),
             _stats("q1", (0.0, 100), (0.0, 100)), _stats("q2", (0.25, 40), None)]  # fmt: skip
    family = {"p1": "f", "p2": "f", "p3": "f", "p4": "f", "q1": "g", "q2": "g"}
    task = dict.fromkeys(family, "t")
    latency = {(s.problem_id, GREEDY): 1.0 for s in stats}
    latency |= {("p1", "beam@4"): 3.0, ("p2", "beam@4"): 3.0, ("p3", "beam@4"): 3.0, ("q1", "beam@4"): 1.0}
    done = impute(stats, ["beam@4"], GREEDY, [family, task], latency, prefill_weight=0.0)
    assert done == {"beam@4": {"p4": "f", "q2": "t"}}
    p4 = stats[3].configs["beam@4"]
    assert p4.accuracy == 1.0 and p4.generated_tokens == pytest.approx(150.0)
    assert latency[("p4", "beam@4")] == pytest.approx(3.0)
    # q2 from the task type (p1, p2, p3, q1): mean difference (1 + 0 + 1 + 0) / 4 = 0.5,
    # tokens 1000/400 = 2.5 x 40 = 100, latency 10/4 = 2.5 x 1.
    q2 = stats[5].configs["beam@4"]
    assert q2.accuracy == pytest.approx(0.75) and q2.generated_tokens == pytest.approx(100.0)
    assert latency[("q2", "beam@4")] == pytest.approx(2.5)


def _live_fit(live_tokens: int) -> Fit:
    """Six arithmetic problems every priced configuration gets wrong; beam@4 measured right on
    the first four (and imputed on the last two) at ``live_tokens`` tokens each."""
    pools = [text_pool(f"p{i}") for i in range(6)]
    est = {f"p{i}": Estimate(1.0, float(live_tokens), 50.0, 1.0) for i in range(4)}
    live = LiveSet({"beam@4": est}, {"beam@4": live_route("beam@4", SETTINGS)}, min_live=3)
    return fit(pools, FREE, configs(), live=live)


def test_the_fit_picks_a_live_configuration_when_it_is_best_within_budget_and_not_over_it() -> None:
    table = _live_fit(150).table
    routes = table["task_routes"]["arithmetic"]
    assert routes["high"]["*"]["strategy"] == "beam_search"
    assert "imputed by the difference estimator on 2" in routes["high"]["*"]["expected"]["source"]
    assert routes["none"]["*"]["strategy"] == "single"
    assert table["provenance"]["live"]["configs"]["beam@4"] == {"measured": 4, "imputed": 2}
    over = _live_fit(100_000).table["task_routes"]["arithmetic"]
    assert all(r["*"]["strategy"] != "beam_search" for r in over.values())


def test_a_held_out_problem_routed_to_a_live_configuration_is_unpriced_never_wrong() -> None:
    from evaluation.heldout.ladder import Outcomes, label_index, routed_labels, summarize
    from evaluation.pricing.table import price_all

    pools = [text_pool("h1", cot_greedy=True)]
    index = label_index(configs(), pools, {"beam@4": live_route("beam@4", SETTINGS)})
    routed = routed_labels({"high": {"h1": {**live_route("beam@4", SETTINGS), "token_budget": 1}}}, index)
    assert routed == {"high": {"h1": "beam@4"}}
    outcomes = Outcomes.of(pools, price_all(FREE, pools, configs()), configs())
    row = summarize("high", [("h1", "beam@4")], outcomes)
    assert (row.problems, row.unpriced, row.configs) == (0, 1, {"beam@4": 1})
