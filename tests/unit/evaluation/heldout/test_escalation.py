"""The escalation report: three arms on the problems both models drew, and the verdict on whether
the larger model pays."""

from __future__ import annotations

import random
from dataclasses import replace

from evaluation.heldout.escalation import (
    MIN_FAMILIES,
    CascadeSpec,
    escalation_report,
    markdown,
    paired_difference,
    verdict,
)
from evaluation.pools.store import prompt_text
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from services.common.confidence import shipped
from services.common.confidence_prompt import with_prompt
from tests.unit.evaluation.pool_fixtures import draw, pool

FREE = LatencyModel()
POT1 = Config("pot@1", "pot", 1)


def _program(answer: str, right: bool, tokens: int = 10):  # type: ignore[no-untyped-def]
    return draw("program", (answer, right), [(answer, right)] * 4, tokens=tokens)


def test_verdict_holds_only_where_the_large_model_is_better() -> None:
    from evaluation.heldout.escalation import Arm

    def arm(acc: float, gen: float, p50: float) -> Arm:
        return Arm("x", "c", acc, 0, 1, gen, 0, p50, p50, 0)

    assert verdict(arm(0.5, 10, 1), arm(0.5, 30, 3), arm(0.4, 20, 2)) == (False, None)
    assert verdict(arm(0.2, 10, 1), arm(0.8, 30, 3), arm(0.78, 20, 2)) == (True, True)
    assert verdict(arm(0.2, 10, 1), arm(0.8, 30, 3), arm(0.76, 20, 2)) == (True, False)  # 4 points short
    assert verdict(arm(0.2, 10, 1), arm(0.8, 30, 3), arm(0.8, 31, 2)) == (True, False)  # more tokens
    assert verdict(arm(0.2, 10, 1), arm(0.8, 30, 3), arm(0.8, 20, 3)) == (True, False)  # no faster at p50


def test_paired_difference_is_the_mean_with_an_interval_around_it() -> None:
    point, low, high = paired_difference([1, 1, 0, 1], [1, 0, 0, 0])
    assert point == 0.5 and low <= point <= high
    assert paired_difference([], []) == (0.0, 0.0, 0.0)


def test_report_pairs_problems_by_id_and_escalates_the_unanswered() -> None:
    # The small model's program abstains on family f1 (so its greedy chain of thought answers,
    # wrongly, with a low confidence) and is right on f2; the large one is right on both.
    fams = [f"f{i}" for i in range(MIN_FAMILIES)]
    small = [replace(pool(f"{f}/1", f, program=_program("" if i == 0 else "1", i > 0),
                          cot=draw("cot", ("9", False), [("9", False)] * 4)), family=f)
             for i, f in enumerate(fams)]  # fmt: skip
    large = [replace(pool(f"{f}/1", f, program=_program("1", True, tokens=40),
                          cot=draw("cot", ("1", True), [("1", True)] * 4)), family=f) for f in fams]  # fmt: skip
    large.append(replace(pool("only-large/1", "x", program=_program("1", True)), family="only"))
    pricer = Pricer(FREE)
    # The gate lies between the shipped model's confidence in f0's fallback and in f1's program.
    gates = []
    for p in small[:2]:
        signals = next(pricer.outcomes(p, POT1, random.Random(0))).signals
        assert signals is not None
        gates.append(shipped().probability(with_prompt(signals, prompt_text(p), shipped())))
    low, high = gates
    assert low < high
    report = escalation_report(small, large, CascadeSpec(pricer, pricer, POT1, POT1, (low + high) / 2))
    assert report["problems"] == MIN_FAMILIES
    fam = {g["group"]: g for g in report["families"]}  # type: ignore[union-attr]
    assert fam["f0"]["large_better"] and fam["f0"]["cascade"]["escalated"] == 1.0
    assert fam["f0"]["cascade"]["accuracy"] == 1.0 and fam["f0"]["small"]["accuracy"] == 0.0
    assert fam["f1"]["large_better"] is False and fam["f1"]["meets"] is None
    assert fam["f1"]["cascade"]["escalated"] == 0.0  # one answering program: above the gate
    # f0: the cascade pays the small model's fallback plus the large model's program, which here
    # costs more than the large model alone, so the target is missed there and overall.
    assert report["verdict"]["families_measured"] == MIN_FAMILIES  # type: ignore[index]
    assert "|" in markdown(report)


def test_choose_takes_the_cheapest_cascade_near_the_large_model_else_the_most_accurate() -> None:
    from evaluation.heldout.escalation import choose

    def rep(cascade_acc: float, cascade_tok: float, large_acc: float = 0.8, large_tok: float = 100) -> dict:  # type: ignore[type-arg]
        return {"all": {"cascade": {"accuracy": cascade_acc, "generated": cascade_tok},
                        "large": {"accuracy": large_acc, "generated": large_tok}}}  # fmt: skip

    assert choose([rep(0.79, 90), rep(0.78, 60), rep(0.70, 10)]) == 1  # within 3 points, cheapest
    assert choose([rep(0.70, 90), rep(0.75, 120), rep(0.75, 110)]) == 2  # none fits: most accurate, cheaper
    assert choose([rep(0.9, 150), rep(0.6, 50)]) == 0  # accurate but not cheaper than the large: no fit


def test_every_default_pair_is_served_by_the_cascade_it_names() -> None:
    """Each priced pair's route builds the served cascade: the small side's vote as ``inner``, the
    large side's strategy, n and params on the escalation deployment (the params are validated)."""
    from calibration.verbs.escalation import DEFAULT_PAIRS
    from evaluation.pricing.cascade import served_route
    from evaluation.pricing.table import default_configs
    from evaluation.routing.served_routes import route_of
    from services.search.strategies.cascade import Cascade
    from services.search.strategies.config import StrategyInput
    from services.search.strategies.single import Single

    configs = {c.name: c for c in default_configs(8)}
    cot = draw("cot", ("1", True), [("1", True)] * 4)
    pools = [pool("p1", program=_program("1", True), cot=cot)]
    for pair in DEFAULT_PAIRS:
        small, large = (configs[name] for name in pair.split("->"))
        route = served_route(route_of(small, pools), route_of(large, pools), 0.75)
        cascade = Cascade.from_input(StrategyInput(n=route["n"], params=route["params"]))
        assert cascade.threshold == 0.75 and cascade.large is not None, pair
        if large.family == "cot_greedy":
            assert isinstance(cascade.large, Single) and cascade.large.greedy, pair
