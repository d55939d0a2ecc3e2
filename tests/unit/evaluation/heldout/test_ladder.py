"""The ladder on hand-built pools: routes map back to the configuration they run, a routed
outcome is that configuration's price on the problem's pool, budgets follow the fit's rule,
unpriceable routes are counted, and ``development`` end to end (estimator off: no encoder)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from calibration.cli import main
from calibration.lib.drawer import DrawSettings, program_version
from evaluation.heldout.ladder import (
    ALL,
    DEFAULT,
    Outcomes,
    best_fixed,
    fit_budgets,
    label_index,
    ladder,
    per_problem,
    problem_budgets,
    route_key,
    routed_labels,
)
from evaluation.pools.store import Draw, ProblemPool, write_chunk
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from evaluation.pricing.table import default_configs, price_all
from evaluation.problems.datasets import DEVELOPMENT_KEY
from evaluation.routing.route_fit import GREEDY, NOT_ROUTABLE, label_of, problem_stats
from evaluation.routing.served_routes import route_of
from evaluation.routing.types import BUDGET_MULTIPLES, PREFILL_WEIGHT
from services.gateway.routing import Route
from tests.unit.evaluation.pool_fixtures import draw

PRICER = Pricer(LatencyModel(step_s=0.01))
EFFORTS = list(BUDGET_MULTIPLES)


def make(pid: str, kind: str = "arithmetic", family: str = "chain_sum", split: str = DEVELOPMENT_KEY,
         **draws: Draw) -> ProblemPool:  # fmt: skip
    problem = {"id": pid, "dataset": family, "level": 1, "question": f"What is {len(pid)} + 17?",
               "reference": "1", "check": "math", "extra": {}}  # fmt: skip
    return ProblemPool(problem, family, kind, split, "label", dict(draws))


def text(pid: str, greedy_right: bool, sampled: list[bool], kind: str = "arithmetic", tokens: int = 10,
         split: str = DEVELOPMENT_KEY) -> ProblemPool:  # fmt: skip
    votes = [("1", True) if r else (f"w{i}", False) for i, r in enumerate(sampled)]
    greedy = ("1", True) if greedy_right else ("w", False)
    return make(pid, kind, split=split, cot=draw("cot", greedy, votes, tokens),
                program=draw("program", greedy, votes, tokens // 2))  # fmt: skip


CONFIGS = [Config("cot_greedy", "cot_greedy"), Config("code_greedy", "code_greedy"), Config("sc@1", "sc", 1),
           Config("sc@4", "sc", 4), Config("sc@4:es", "sc", 4, early_stop=True), Config("pot@3", "pot", 3),
           Config("hybrid@2+cot2", "pot", 2, cot=2), Config("code_vote@4", "code_vote", 4)]  # fmt: skip


def unbounded(pools: list[ProblemPool]) -> dict[str, tuple[str, Mapping[str, float]]]:
    return problem_budgets({p.id: "arithmetic" for p in pools}, {DEFAULT: dict.fromkeys(EFFORTS, 1e9)})


def test_every_route_maps_back_to_the_configuration_it_runs_even_after_the_gateway_parses_it() -> None:
    pools = [text("p1", True, [True, False, True, False])]
    configs = [c for c in default_configs(8, ["orm"]) if c.family not in NOT_ROUTABLE]
    index = label_index(configs, pools)
    for c in configs:
        parsed = Route.model_validate(route_of(c, pools)).model_dump()  # as route_questions returns it
        assert index[route_key(parsed)] == label_of(c)
    assert len(set(index.values())) == len(configs) - 1  # the two greedy configurations are one route
    assert index[route_key({"strategy": "single", "n": 1, "params": {"greedy": True}})] == GREEDY


def test_a_routed_outcome_is_the_pinned_configurations_price_on_that_problem() -> None:
    pools = [text("a", True, [True, True, False, False]), text("bb", False, [False, True, True, True]),
             text("ccc", False, [False, False, False, True], kind="counting")]  # fmt: skip
    outcomes = Outcomes.of(pools, price_all(PRICER, pools, CONFIGS), CONFIGS)
    routes = {e: {p.id: route_of(CONFIGS[3], pools) for p in pools} for e in EFFORTS}  # sc@4 everywhere
    labels = routed_labels(routes, label_index(CONFIGS, pools))
    groups = ladder(pools, labels, outcomes, unbounded(pools), EFFORTS)
    estimates = [PRICER.estimate(p, CONFIGS[3]) for p in pools]
    assert all(e is not None for e in estimates)
    routed = groups[ALL]["routed"]["high"]
    assert routed.problems == 3 and routed.unpriced == 0 and routed.configs == {"sc@4": 3}
    assert routed.accuracy == pytest.approx(sum(e.accuracy for e in estimates if e) / 3)
    assert routed.generated_tokens == pytest.approx(sum(e.generated for e in estimates if e) / 3)
    assert routed.cost == pytest.approx(sum(e.generated + PREFILL_WEIGHT * e.prompt for e in estimates if e) / 3)
    fixed = {f.name: f for f in groups[ALL]["fixed"]}
    assert fixed["sc@4"].accuracy == routed.accuracy  # the fixed row is the same price
    assert groups["counting"]["routed"]["high"].accuracy == pytest.approx(estimates[2].accuracy if estimates[2] else 0)
    rows = {r["id"]: r for r in per_problem(pools, labels, outcomes, {})}
    assert rows["bb"]["efforts"]["xhigh"]["accuracy"] == pytest.approx(estimates[1].accuracy if estimates[1] else 0)


def test_a_route_the_pools_cannot_price_is_counted_not_dropped() -> None:
    pools = [text("a", True, [True] * 4), text("bb", True, [True] * 4)]
    outcomes = Outcomes.of(pools, price_all(PRICER, pools, CONFIGS), CONFIGS)
    labels: dict[str, dict[str, str | None]] = {"high": {"a": "code_vote@4", "bb": "sc@4"},
                                                "none": {"a": None, "bb": GREEDY}}  # fmt: skip
    groups = ladder(pools, labels, outcomes, unbounded(pools), ["none", "high"])
    high, none = groups[ALL]["routed"]["high"], groups[ALL]["routed"]["none"]
    assert (high.problems, high.unpriced, high.accuracy) == (1, 1, 1.0)
    assert (none.problems, none.unpriced) == (1, 1) and none.configs == {"None": 1, GREEDY: 1}


def test_budgets_are_the_fits_per_task_type_and_the_default_for_unseen_task_types() -> None:
    calibration = [text("a", True, [True] * 4, tokens=10, split="calibration"),
                   text("bb", True, [True] * 4, tokens=30, split="calibration"),
                   make("ccc", "counting", "letter_counting", "calibration",
                        cot=draw("cot", ("1", True), [("1", True)] * 4, 100))]  # fmt: skip
    calibration[2].problem["question"] = "How many times does the letter r appear in the word strawberry?"
    greedy = [c for c in CONFIGS if c.family in ("cot_greedy", "code_greedy")]
    stats = problem_stats(calibration, price_all(PRICER, calibration, greedy), greedy)
    budgets = fit_budgets(stats, calibration, BUDGET_MULTIPLES)
    prompt = 100 * PREFILL_WEIGHT  # pool_fixtures' calls prefill 100 tokens
    assert budgets["arithmetic"]["none"] == pytest.approx(20 + prompt)
    assert budgets["arithmetic"]["high"] == pytest.approx(8 * (20 + prompt))
    assert budgets["computable"]["xhigh"] == pytest.approx(16 * (100 + prompt))
    # the default routes' budgets: each family weighs one (chain_sum's mean 20, letter_counting's 100)
    assert budgets[DEFAULT]["low"] == pytest.approx(2 * (60 + prompt))
    per = problem_budgets({"h1": "arithmetic", "h2": "open"}, budgets)
    assert per["h1"] == ("arithmetic", budgets["arithmetic"]) and per["h2"] == (DEFAULT, budgets[DEFAULT])


def test_the_best_fixed_configuration_is_the_most_accurate_one_within_budget_and_none_is_greedy() -> None:
    # sc@4 is right more often than the greedy sample but costs four samples
    pools = [text(f"p{i}", False, [True, True, True, False], tokens=10) for i in range(3)]
    outcomes = Outcomes.of(pools, price_all(PRICER, pools, CONFIGS), CONFIGS)
    members = [outcomes.stats[p.id] for p in pools]
    greedy_cost = members[0].configs[GREEDY].tokens
    fitted = {"arithmetic": {"none": greedy_cost, "minimal": greedy_cost, "high": 100 * greedy_cost}}
    budgets = problem_budgets({p.id: "arithmetic" for p in pools}, fitted)
    best = {b.effort: b for b in best_fixed(members, budgets, list(fitted["arithmetic"]), outcomes)}
    assert best["high"].budget == 100 * greedy_cost and best["high"].budget_from == ["arithmetic"]
    assert best["none"].config == GREEDY and best["none"].fits
    assert best["minimal"].summary.cost <= greedy_cost and best["minimal"].fits
    assert best["high"].summary.accuracy == max(
        sum(m.configs[lab].accuracy for m in members) / 3 for lab in members[0].configs
    )
    assert best["high"].summary.accuracy > best["none"].summary.accuracy


def test_development_fits_on_calibration_only_and_writes_the_checks_and_per_problem_outcomes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    header = {"git_describe": "abc", "model": "m", "model_sha256": "remote:m", "program_version": program_version(),
              "settings": DrawSettings(k=4).as_dict(),
              "data": {"seed": 0, "per_family": 3, "families": ["chain_sum", "letter_counting"]}}  # fmt: skip
    calibration = [text(f"c{i}" * (i + 1), i % 2 == 0, [True, True, False, True], split="calibration")
                   for i in range(4)]  # fmt: skip
    development = [text("h1", False, [True, True, True, False]), text("h22", True, [True, False, True, True])]
    write_chunk(tmp_path, "calibration", 1, header, calibration)
    write_chunk(tmp_path, DEVELOPMENT_KEY, 1, header, development)
    out = tmp_path / "ladder.json"
    img = tmp_path / "img"
    assert main(["development", "--pools", str(tmp_path), "--out", str(out), "--estimator", "none",
                 "--img-dir", str(img)]) == 0  # fmt: skip
    body = json.loads(out.read_text())
    assert body["table"]["provenance"]["problems"] == 4  # fitted on the calibration pools only
    assert body["provenance"]["development"]["chunks"] == [f"{DEVELOPMENT_KEY}-00001.jsonl"]
    assert body["coverage"] == {"drawn": 2, "intended": 6, "missing_families": ["letter_counting"],
                                "families": {"chain_sum": 2}}  # fmt: skip
    assert [r["id"] for r in body["per_problem"]] == ["h1", "h22"]
    assert body["per_problem"][0]["efforts"]["none"]["config"] == GREEDY
    assert body["per_problem"][0]["efforts"]["medium"]["route"].startswith("arithmetic, every bin, adaptive: ")
    assert body["per_problem"][0]["efforts"]["low"]["route"] == "arithmetic, every bin, 4 problems"
    names = [c["name"] for c in body["checks"]]
    assert len(names) == 7 and body["checks"][0]["detail"].startswith("development: 2 of 6 drawn")
    assert [k["task"] for k in body["frontier"]] == ["arithmetic"]  # per development kind, plotted
    assert body["frontier"][0]["problems"] == 2 and body["frontier"][0]["ladder"][0]["effort"] == "none"
    assert (img / "arithmetic.png").read_bytes().startswith(b"\x89PNG")
    printed = capsys.readouterr().out
    assert printed.startswith("# Development-split ladder from pools: ") and "not held-out figures" in printed
    assert "## Must-show checks" in printed and "**MISS**: >= 200 development problems" in printed
    assert "## all: 2 development problems" in printed
