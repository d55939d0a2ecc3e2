"""The routed report's offline-priced ladder prices a cascade route on the escalation model's
development pools where it has the problem, and leaves it unpriced (never wrong) elsewhere."""

from __future__ import annotations

from calibration.lib.fit import FittedPools
from calibration.lib.routed_report import offline_ladder
from evaluation.routing.escalation_join import escalation_set, pairs_of
from evaluation.routing.route_fit import fit
from tests.unit.evaluation.routing.test_escalation_join import _abstaining
from tests.unit.evaluation.routing.test_route_fit import FREE, configs, text_pool

EFFORTS = ["none", "minimal", "low", "medium", "high", "xhigh"]


def _fitted() -> FittedPools:
    """Six arithmetic problems the small model gets wrong every way, the large model right on
    the four it drew: the fit escalates from some effort up."""
    small = [_abstaining(f"c{i}") for i in range(6)]
    large = [text_pool(f"c{i}", program_greedy=True, programs=(True,) * 4, program_tokens=400) for i in range(4)]
    live = escalation_set(small, large, FREE, FREE, pairs_of(["pot@1->pot@1"], configs(), (0.99,)), "both pools")
    fitted = fit(small, FREE, configs(), live=live)
    fitted.table["escalation_model"] = "large"  # as fit_pools names it
    return FittedPools(fitted, small, FREE, configs(), live, FREE)


def test_cascades_are_priced_where_the_large_model_has_the_development_problem() -> None:
    fitted = _fitted()
    development = [_abstaining(f"h{i}") for i in range(3)]
    large = [text_pool(f"h{i}", program_greedy=True, programs=(True,) * 4) for i in range(2)]
    priced = offline_ladder(fitted, development, EFFORTS, large_pools=large)["all"]["routed"]
    alone = offline_ladder(fitted, development, EFFORTS)["all"]["routed"]
    climbed = [e for e in EFFORTS if any("cascade" in c for c in priced[e].configs)]
    assert climbed and "none" not in climbed
    top = climbed[-1]
    assert (priced[top].problems, priced[top].unpriced, priced[top].accuracy) == (2, 1, 1.0)
    assert (alone[top].problems, alone[top].unpriced) == (0, 3)  # no large pools: unpriced, never wrong
    assert priced["none"].problems == 3 and priced["none"].accuracy == 0.0
