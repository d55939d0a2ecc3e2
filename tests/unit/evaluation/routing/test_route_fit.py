"""The routing fitter on small hand-built pools: budgets, the greedy ``none``, task types from
the gateway's classifier, the default for unseen kinds, coverage, bins and ``expected``."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation.pools.store import Call, CodeTests, Draw, DrawKind, PoolCandidate, ProblemPool, task_type_of
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from evaluation.routing.route_fit import FitSettings, fit
from evaluation.routing.served_routes import route_of
from evaluation.routing.types import BUDGET_MULTIPLES
from services.common.difficulty_features import FEATURE_DIM
from services.gateway.routing import Route, load_routing_table

FREE = Pricer(LatencyModel(step_s=0.01))  # 10 ms per decoded token: latencies are tokens / 100
ARITHMETIC = "What is 17 + 25?"
COUNTING = "How many times does the letter r appear in the word strawberry?"
CODE = 'def add(a, b):\n    """Return the sum of a and b."""\n'
EFFORTS = list(BUDGET_MULTIPLES)


def _draw(kind: DrawKind, greedy: bool, sampled: Sequence[bool], tokens: int) -> Draw:
    """A greedy candidate and sampled ones: right ones vote "1", wrong ones each their own key."""

    def cand(i: int, right: bool, is_greedy: bool) -> PoolCandidate:
        key = "1" if right else f"w{i}"
        return PoolCandidate(i, is_greedy, i, 0 if is_greedy else 1, "t", tokens, False, key, right)

    cands = [cand(0, greedy, True), *(cand(i, r, False) for i, r in enumerate(sampled, start=1))]
    calls = (Call(1, 0.0, 256, 50, 0, tokens, 1.0), Call(len(sampled), 0.7, 256, 50, 49, tokens * len(sampled), 1.0))
    return Draw(kind, tuple(cands), calls)


def _pool(pid: str, question: str, family: str, kind: str, **draws: Draw) -> ProblemPool:
    problem = {"id": pid, "dataset": family, "level": 1, "question": question, "reference": "1",
               "check": "code" if "code" in draws else "math", "extra": {}}  # fmt: skip
    return ProblemPool(problem, family, kind, "calibration", "stale-label", dict(draws))


def text_pool(pid: str, question: str = ARITHMETIC, family: str = "chain_sum", kind: str = "arithmetic", *,
              cot_greedy: bool = False, cot: Sequence[bool] = (False,) * 4, program_greedy: bool = False,
              programs: Sequence[bool] = (False,) * 4, cot_tokens: int = 100,
              program_tokens: int = 40) -> ProblemPool:  # fmt: skip
    return _pool(pid, question, family, kind, cot=_draw("cot", cot_greedy, cot, cot_tokens),
                 program=_draw("program", program_greedy, programs, program_tokens))  # fmt: skip


def configs() -> list[Config]:
    return [
        Config("cot_greedy", "cot_greedy"), Config("code_greedy", "code_greedy"),
        Config("sc@2", "sc", 2), Config("sc@4", "sc", 4), Config("pot@1", "pot", 1), Config("pot@3", "pot", 3),
        Config("code_vote@4", "code_vote", 4), Config("code_pass@4", "code_pass", 4),
    ]  # fmt: skip


def routes_of(table: dict[str, Any], task: str | None = None) -> dict[str, dict[str, Any]]:
    routes: dict[str, dict[str, Any]] = table["task_routes"][task] if task else table["routes"]
    return routes


def validate(table: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "routing.json"
    path.write_text(json.dumps(table))
    load_routing_table(path)


def without_expected(table: dict[str, Any]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(table))
    for routes in [copy["routes"], *copy["task_routes"].values()]:
        for bins in routes.values():
            for route in bins.values():
                route.pop("expected", None)
    return copy


def test_task_types_come_from_the_gateway_classifier_not_the_stored_label() -> None:
    assert task_type_of(text_pool("a")) == "arithmetic"
    assert task_type_of(text_pool("c", COUNTING, "letter_counting", "counting")) == "computable"


def test_none_is_one_greedy_sample_and_budgets_buy_more_at_higher_efforts(tmp_path: Path) -> None:
    """Programs are cheap and right on half the problems, but ``none`` stays the greedy chain of
    thought; sc@2 (2x the greedy cost) is right on 5 of 6 subsets where programs fail, sc@4 (4x)
    always, out of reach until ``medium``."""
    pools = [
        text_pool(f"p{i}", program_greedy=True, programs=(True,) * 4, cot=(True,) * 4, cot_tokens=100) for i in range(3)
    ] + [text_pool(f"q{i}", cot=(True, True, False, False), cot_tokens=100) for i in range(3)]  # fmt: skip
    table = fit(pools, FREE, configs()).table
    arith = routes_of(table, "arithmetic")
    assert arith["none"]["*"]["strategy"] == "single" and arith["none"]["*"]["params"] == {"greedy": True}
    assert arith["none"]["*"]["expected"]["accuracy"] == 0.0
    # minimal (1x = 150 token-equivalents incl. prefill): one program (40 + prefill) fits, sc does not
    assert arith["minimal"]["*"]["strategy"] == "program_of_thought"
    assert arith["minimal"]["*"]["expected"]["accuracy"] == pytest.approx(0.5)
    assert (arith["low"]["*"]["strategy"], arith["low"]["*"]["n"]) == ("self_consistency", 2)
    assert (arith["medium"]["*"]["strategy"], arith["medium"]["*"]["n"]) == ("self_consistency", 4)
    accuracy = [arith[e]["*"]["expected"]["accuracy"] for e in EFFORTS[1:]]
    assert accuracy == sorted(accuracy) and accuracy[-1] == 1.0
    validate(without_expected(table), tmp_path)


@pytest.mark.skipif("expected" not in Route.model_fields, reason="routing.py has no Route.expected yet")
def test_the_table_with_its_expectations_validates_as_the_gateway_loads_it(tmp_path: Path) -> None:
    pools = [text_pool(f"p{i}", program_greedy=i % 2 == 0) for i in range(4)]
    validate(fit(pools, FREE, configs()).table, tmp_path)


def test_expected_figures_are_the_priced_outcomes_of_the_fitted_problems() -> None:
    pools = [text_pool("p0", program_greedy=True), text_pool("p1", program_greedy=True), text_pool("p2"),
             text_pool("p3")]  # fmt: skip
    table = fit(pools, FREE, configs(), source="pools: test").table
    expected = routes_of(table, "arithmetic")["minimal"]["*"]["expected"]
    route = routes_of(table, "arithmetic")["minimal"]["*"]
    assert route["strategy"] == "program_of_thought" and route["n"] == 1  # pot@1: the only right one, and cheap
    assert expected["accuracy"] == pytest.approx(0.5) and expected["problems"] == 4
    low, high = expected["interval"]
    assert 0.0 <= low <= 0.5 <= high <= 1.0 and high > low
    assert expected["generated_tokens"] == pytest.approx(40.0) and expected["prompt_tokens"] == pytest.approx(50.0)
    assert expected["p50_latency_s"] == pytest.approx(0.4)
    assert expected["source"].startswith("pools: test; arithmetic")


def test_unseen_task_types_get_the_best_on_average_across_families() -> None:
    """Programs solve 3 of 5 chain_sum problems and no letter_counting one, sampled chains of
    thought only the one letter_counting problem: per problem programs win (3/6 vs 1/6), on
    average across the two families self-consistency does (0.5 vs 0.3); the default takes that."""
    pools = [text_pool(f"a{i}", program_greedy=i < 3, programs=(i < 3,) * 4) for i in range(5)]
    pools.append(text_pool("c0", COUNTING, "letter_counting", "counting", cot=(True,) * 4))
    # Two families cannot clear a paired margin; with none, the better average decides.
    table = fit(pools, FREE, configs(), settings=FitSettings(switch_z=0.0)).table
    default = routes_of(table)["xhigh"]["*"]
    assert default["strategy"] == "self_consistency"
    assert "2 families" in default["expected"]["source"]
    assert routes_of(table)["none"]["*"]["strategy"] == "single"
    assert set(table["task_routes"]) == {"arithmetic", "computable"}
    assert routes_of(table, "arithmetic")["xhigh"]["*"]["strategy"] == "program_of_thought"


def test_a_configuration_priced_on_some_problems_of_a_group_does_not_compete_there() -> None:
    """A code problem the classifier calls arithmetic joins the arithmetic group: code_vote is
    priced on it alone and perfect there, but only configurations priced on every member compete."""
    code = _pool("k0", "Compute 2 + 2 with code_vote", "humaneval", "code",
                 code=_draw("code", True, (True,) * 4, 30))  # fmt: skip
    assert task_type_of(code) == "arithmetic"
    pools = [text_pool("p0"), text_pool("p1"), code]
    table = fit(pools, FREE, configs()).table
    strategies = {b["*"]["strategy"] for b in routes_of(table, "arithmetic").values()}
    assert strategies == {"single"}  # greedy is the one configuration every member prices


def _code_draw(greedy: bool, sampled: Sequence[bool], *, run: bool = True) -> Draw:
    """A code draw whose candidates ran on two recorded inputs: right ones all behave alike,
    each wrong one its own way (nothing asserted: the larger cluster decides)."""
    draw = _draw("code", greedy, sampled, 80)
    ran = tuple(
        replace(c, text=f"```python\ndef add(a, b):\n    return a + b + {c.index} * 0\n```",
                behaviour=["3", "4"] if c.correct else [f"w{c.index}", "0"], asserted=[None, None])
        for c in draw.candidates
    )  # fmt: skip
    inputs: tuple[tuple[str, str | None], ...] = (("1, 2", None), ("2, 2", None))
    tests = CodeTests("add(1, 2)\nadd(2, 2)", "add", inputs, Call(1, 0.0, 256, 30, 0, 40, 1.0), "v1")
    return replace(draw, candidates=ran, tests=tests) if run else draw


def test_code_prompts_route_to_code_execution_priced_by_behaviour_and_never_to_a_text_vote() -> None:
    """The greedy completion is wrong, most sampled ones right: code_execution's largest
    behaviour cluster is right, so efforts whose budget buys it route code there; the vote on
    code text (code_vote) and pass@n are priced but never routed."""
    pools = [_pool(f"k{i}", CODE, "humaneval", "code", code=_code_draw(False, (True, True, True, False)))
             for i in range(4)]  # fmt: skip
    every = [*configs(), Config("code_exec@2", "code_exec", 2), Config("code_exec@4", "code_exec", 4)]
    table = fit(pools, FREE, every, settings=FitSettings(switch_z=0.0)).table
    code = routes_of(table, "code")
    assert code["none"]["*"]["strategy"] == "single" and code["none"]["*"]["expected"]["accuracy"] == 0.0
    assert code["xhigh"]["*"]["strategy"] == "code_execution" and code["xhigh"]["*"]["n"] == 4
    assert code["xhigh"]["*"]["expected"]["accuracy"] == 1.0  # three right of four sampled plus a wrong greedy
    assert code["xhigh"]["*"]["token_budget"] == 4 * 256 + 256  # four completions and the tests, at the caps
    names = {r["strategy"] for bins in code.values() for r in bins.values()}
    assert names == {"single", "code_execution"}
    assert table["provenance"]["code_behaviour"] == "4 of 4 code pools"
    unrun = [_pool(f"k{i}", CODE, "humaneval", "code", code=_code_draw(False, (True,) * 4, run=False))
             for i in range(4)]  # fmt: skip
    plain = fit(unrun, FREE, every, settings=FitSettings(switch_z=0.0)).table
    assert {r["strategy"] for bins in routes_of(plain, "code").values() for r in bins.values()} == {"single"}
    for oracle in ("code_pass", "code_vote"):
        with pytest.raises(ValueError, match="not a strategy"):
            route_of(Config(f"{oracle}@4", oracle, 4), pools)


def test_routes_run_the_configuration_as_priced() -> None:
    pools = [text_pool("p0")]
    assert route_of(Config("pot@3", "pot", 3), pools) == {
        "strategy": "program_of_thought", "n": 3, "params": {"early_stop": False}, "token_budget": 3 * 256 + 256,
    }  # fmt: skip
    hybrid = route_of(Config("hybrid@2+cot2", "pot", 2, cot=2, early_stop=True), pools)
    assert hybrid["params"] == {"early_stop": True, "first_wave": 3, "mode": "hybrid", "cot": 2, "cot_weight": 0.5}
    assert route_of(Config("sc@4:es", "sc", 4, early_stop=True), pools)["params"] == {
        "early_stop": True,
        "first_wave": 3,
    }
    assert route_of(Config("bon@4:orm", "bon", 4, judge="orm"), pools)["verifier"] == "orm"


def test_embedding_features_give_an_estimator_bins_and_per_bin_routes(tmp_path: Path) -> None:
    """Easy problems (feature 0 high) are solved by one program, hard ones only by sc@4; with
    enough problems per bin, xhigh routes the bins apart."""
    easy = [text_pool(f"e{i}", program_greedy=True, programs=(True,) * 4, cot_greedy=True, cot=(True,) * 4)
            for i in range(6)]  # fmt: skip
    hard = [text_pool(f"h{i}", cot=(True, True, True, False)) for i in range(6)]
    features = np.zeros((12, FEATURE_DIM))
    features[:6, 0] = 1.0
    features[:, 1] = np.linspace(0, 1, 12)  # no two rows alike
    settings = FitSettings(bins=("easy", "hard"), switch_z=0.0)
    result = fit(easy + hard, FREE, configs(), features=features, settings=settings)
    table = result.table
    assert table["estimator"]["kind"] == "embedding"
    assert [b["name"] for b in table["difficulty_bins"]] == ["easy", "hard"] and table["difficulty_bins"][-1][
        "max"
    ] == 1.0
    xhigh = routes_of(table, "arithmetic")["xhigh"]
    assert xhigh["easy"]["strategy"] == "program_of_thought" and xhigh["hard"]["strategy"] == "self_consistency"
    assert xhigh["easy"]["expected"]["problems"] == 6
    by_id = {p["id"]: p for p in result.predictions}
    assert by_id["e0"]["bin"] == "easy" and by_id["h0"]["bin"] == "hard"
    assert by_id["h0"]["efforts"]["xhigh"]["config"] == "sc@2" and by_id["h0"]["efforts"]["none"]["config"] == "greedy"
    validate(without_expected(table), tmp_path)


def test_budget_multiples_that_fall_are_refused() -> None:
    falling = {**BUDGET_MULTIPLES, "high": 2.0}
    with pytest.raises(ValueError, match="must not decrease"):
        fit([text_pool("p0")], FREE, configs(), settings=FitSettings(multiples=falling))


def test_on_random_pools_every_ladder_climbs_and_none_is_greedy(tmp_path: Path) -> None:
    """Whatever the pools say, per task type and bin the expected accuracy never falls from one
    effort to the next (budgets only grow over the same problems: the bin's own, or the task
    type's for a "*" route), ``none`` is greedy in every bin, and the table loads."""
    import random

    rng = random.Random(7)
    questions = [(ARITHMETIC, "chain_sum", "arithmetic"), (COUNTING, "letter_counting", "counting")]
    pools = []
    for i in range(16):
        question, family, kind = questions[i % 2]
        flips = [rng.random() < 0.4 for _ in range(10)]
        pools.append(text_pool(f"r{i}", question, family, kind, cot_greedy=flips[0], cot=flips[1:5],
                               program_greedy=flips[5], programs=flips[6:10],
                               cot_tokens=rng.randint(50, 200), program_tokens=rng.randint(20, 120)))  # fmt: skip
    features = np.random.default_rng(7).normal(size=(16, FEATURE_DIM))
    table = fit(pools, FREE, configs(), features=features, settings=FitSettings(min_bin_problems=2)).table
    compared = 0
    for routes in [table["routes"], *table["task_routes"].values()]:
        assert all(r["params"] == {"greedy": True} for r in routes["none"].values())
        for lower, higher in itertools.pairwise(EFFORTS[1:]):
            for name, route in routes[higher].items():
                if name in routes[lower]:
                    low, high = routes[lower][name]["expected"], route["expected"]
                    assert high["accuracy"] >= low["accuracy"] - 1e-12, (lower, higher, name)
                    compared += 1
    assert compared >= 20 and "easy" in table["task_routes"]["arithmetic"]["none"]
    validate(without_expected(table), tmp_path)
