"""Cascades as routable configurations: parsed pairs, priced only where both models drew,
served as the cascade route, merged with the live set, and chosen by the fit only where
escalating pays within an effort's budget."""

from __future__ import annotations

import pytest

from evaluation.pools.store import ProblemPool
from evaluation.pricing.pricer import Estimate
from evaluation.routing.escalation_join import CascadePair, escalation_set, merged, pairs_of
from evaluation.routing.live_join import LiveSet
from evaluation.routing.route_fit import fit
from services.search.strategies.cascade import Cascade
from services.search.strategies.config import StrategyInput
from tests.unit.evaluation.pool_fixtures import draw, pool
from tests.unit.evaluation.routing.test_route_fit import FREE, configs, text_pool


def _abstaining(pid: str) -> ProblemPool:
    """The small model: no program answers, and the fallback chain of thought is wrong."""
    return pool(pid, cot=draw("cot", ("9", False), [("9", False)] * 4, tokens=100),
                program=draw("program", ("", False), [("", False)] * 4, tokens=40))  # fmt: skip


def test_pairs_are_parsed_at_every_threshold_and_a_bad_one_is_named() -> None:
    pairs = pairs_of(["pot@1->pot@3", "pot@1->cot_greedy"], configs(), (0.5, 0.9))
    assert [p.label for p in pairs] == [
        "cascade:pot@1->pot@3@0.5", "cascade:pot@1->pot@3@0.9",
        "cascade:pot@1->cot_greedy@0.5", "cascade:pot@1->cot_greedy@0.9",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="'pot@1-pot@3'"):
        pairs_of(["pot@1-pot@3"], configs())
    with pytest.raises(ValueError, match="'pot@1->pot@99'"):
        pairs_of(["pot@1->pot@99"], configs())


def test_a_cascade_is_priced_only_where_both_models_drew_and_served_as_the_cascade() -> None:
    small = [_abstaining(f"p{i}") for i in range(4)]
    large = [text_pool(f"p{i}", program_greedy=True, programs=(True,) * 4) for i in range(2)]
    by_name = {c.name: c for c in configs()}
    # 0.99: above the shipped confidence of any small answer to "What is 0 + 1?", so it escalates
    pairs = [CascadePair(by_name["pot@1"], by_name["pot@3"], 0.99),
             CascadePair(by_name["cot_greedy"], by_name["pot@1"], 0.99)]  # fmt: skip
    live = escalation_set(small, large, FREE, FREE, pairs, "both pools")
    assert live is not None
    assert set(live.estimates) == {"cascade:pot@1->pot@3@0.99"}  # a greedy chain of thought is no vote to gate on
    per = live.estimates["cascade:pot@1->pot@3@0.99"]
    assert set(per) == {"p0", "p1"}
    # every run escalates, and the large model is right
    assert all(e.accuracy == 1.0 and e.escalated == 1.0 for e in per.values())
    route = live.routes["cascade:pot@1->pot@3@0.99"]
    assert route["strategy"] == "cascade" and route["params"]["large_n"] == 3
    served = Cascade.from_input(StrategyInput(n=route["n"], params=route["params"]))
    assert served.threshold == 0.99
    assert escalation_set(small, [text_pool("other")], FREE, FREE, pairs, "x") is None


def test_merged_keeps_every_configuration_and_the_smallest_minimum() -> None:
    beam = LiveSet({"beam@4": {"p1": Estimate(1, 1, 1, 1)}}, {"beam@4": {"strategy": "beam_search"}}, 3, "live")
    cascade = LiveSet({"cascade:a->b@0.5": {"p2": Estimate(1, 1, 1, 1)}}, {"cascade:a->b@0.5": {}}, 2, "pools")
    both = merged(beam, None, cascade)
    assert both is not None and set(both.estimates) == {"beam@4", "cascade:a->b@0.5"}
    assert both.min_live == 2 and both.source == "live; pools"
    assert both.source_of("beam@4") == "live" and both.source_of("cascade:a->b@0.5") == "pools"
    assert merged(None, beam) is beam and merged(None) is None


def _fit(large_right: bool):  # type: ignore[no-untyped-def]
    """Six arithmetic problems the small model gets wrong every way; the large model drew the
    first four, with programs of 400 tokens right (or wrong) on every one."""
    small = [_abstaining(f"p{i}") for i in range(6)]
    large = [text_pool(f"p{i}", program_greedy=large_right, programs=(large_right,) * 4, program_tokens=400)
             for i in range(4)]  # fmt: skip
    pairs = pairs_of(["pot@1->pot@1"], configs(), (0.99,))
    return fit(small, FREE, configs(), live=escalation_set(small, large, FREE, FREE, pairs, "both pools"))


def test_the_fit_escalates_where_the_large_model_pays_and_not_where_it_does_not() -> None:
    routes = _fit(large_right=True).table["task_routes"]["arithmetic"]
    climbed = [effort for effort, bins in routes.items() if bins["*"]["strategy"] == "cascade"]
    assert climbed and "none" not in climbed
    assert (
        "measured (both pools) on 4, imputed by the difference estimator on 2"
        in routes[climbed[0]]["*"]["expected"]["source"]
    )
    flat = _fit(large_right=False).table["task_routes"]["arithmetic"]
    assert all(bins["*"]["strategy"] != "cascade" for bins in flat.values())


def test_a_family_is_guessed_for_a_configuration_only_where_none_of_its_problems_was_measured() -> None:
    from evaluation.routing.route_fit import guessed_families
    from evaluation.routing.types import ProblemStats

    stats = [ProblemStats(pid, "q", 1) for pid in ("a1", "a2", "b1", "b2")]
    family_of = {"a1": "a", "a2": "a", "b1": "b", "b2": "b"}
    imputed = {"cascade:x": {"a1": "a", "b1": "t", "b2": "t"}}
    assert guessed_families(imputed, stats, family_of) == {"cascade:x": {"b"}}


def test_a_label_names_its_cascade_back() -> None:
    from evaluation.routing.escalation_join import pair_of_label

    pair = pairs_of(["pot@1->cot_greedy"], configs(), (0.75,))[0]
    assert pair_of_label(pair.label, configs()) == pair
    assert pair_of_label("pot@1", configs()) is None
    assert pair_of_label("cascade:pot@1->pot@99@0.5", configs()) is None
    assert pair_of_label("cascade:pot@1->pot@3@high", configs()) is None


def test_an_escalating_adaptive_vote_is_priced_only_with_both_pools_and_wins_where_the_large_model_pays() -> None:
    from evaluation.pricing.table import ESCALATING_ORDERS, adaptive_configs
    from evaluation.routing.escalation_join import adaptive_set

    small = [_abstaining(f"p{i}") for i in range(6)]
    large = [text_pool(f"p{i}", program_greedy=True, programs=(True,) * 4, program_tokens=400) for i in range(4)]
    escalating = adaptive_configs(ESCALATING_ORDERS)
    assert all(c.escalates and not c.applies(small[0]) for c in escalating)  # one model's pool cannot price it
    assert FREE.escalating(small[0], escalating[0], text_pool("p0", cot=()), FREE) is not None
    assert FREE.escalating(small[0], adaptive_configs()[0], large[0], FREE) is None  # no escalate step
    live = adaptive_set(small, large, FREE, FREE, escalating, "both pools")
    assert live is not None and all(set(per) == {"p0", "p1", "p2", "p3"} for per in live.estimates.values())
    assert all(r["strategy"] == "adaptive" and "escalate" in r["params"]["steps"] for r in live.routes.values())
    table = fit(small, FREE, configs() + adaptive_configs() + escalating, live=live).table
    routes = table["task_routes"]["arithmetic"]
    for effort in ("medium", "high", "xhigh"):
        route = routes[effort]["*"]
        assert route["strategy"] == "adaptive" and "escalate" in route["params"]["steps"].split(","), effort
        assert route["expected"]["accuracy"] > 0.5


def test_a_cascade_that_beats_every_escalating_adaptive_vote_keeps_its_efforts() -> None:
    from evaluation.pricing.table import ESCALATING_ORDERS, adaptive_configs
    from evaluation.routing.escalation_join import adaptive_set

    small = [_abstaining(f"p{i}") for i in range(6)]
    # the large model's chains of thought are right and one program in four: the adaptive vote
    # escalates programs and is sometimes right, the cascade onto its greedy chain of thought always
    large = [text_pool(f"p{i}", cot_greedy=True, cot=(True,) * 4, programs=(True, False, False, False))
             for i in range(4)]  # fmt: skip
    escalating = adaptive_configs(ESCALATING_ORDERS)
    live = merged(
        escalation_set(small, large, FREE, FREE, pairs_of(["pot@1->cot_greedy"], configs(), (0.99,)), "both"),
        adaptive_set(small, large, FREE, FREE, escalating, "both"),
    )
    assert live is not None
    best_adaptive = max(e.accuracy for label, per in live.estimates.items() if label.startswith("adaptive@")
                        for e in per.values())  # fmt: skip
    assert 0.0 < best_adaptive < 1.0
    routes = fit(small, FREE, configs() + adaptive_configs() + escalating, live=live).table["task_routes"]
    high = routes["arithmetic"]["high"]["*"]
    assert high["strategy"] == "cascade" and high["expected"]["accuracy"] == 1.0
