"""Offline pricing: unbiased subset estimates, the strategies' vote and stop rules replayed."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping

import pytest

from evaluation.pools.store import prompt_text
from evaluation.pricing.cascade import cascade, hopeless, unsettled
from evaluation.pricing.pricer import Ballot, Config, LatencyModel, Pricer, _waves, subsets, winner
from evaluation.pricing.table import default_configs, fit_latency, price_all, table
from evaluation.stats.ledger import pass_at_k
from services.common.confidence import shipped
from services.common.confidence_prompt import with_prompt
from services.search.strategies.stopping import should_stop, wave_sizes
from tests.unit.evaluation.pool_fixtures import draw, pool

FREE = LatencyModel()


def stop(votes: Mapping[str, float], remaining: float) -> bool:
    return should_stop(votes, remaining, 0.9).stop


def test_subsets_enumerate_when_few_and_sample_when_many() -> None:
    rng = random.Random(0)
    assert list(subsets(4, 2, rng, 10)) == list(itertools.combinations(range(4), 2))
    assert len(list(subsets(4, 2, rng, 12, ordered=True))) == math.perm(4, 2)
    drawn = list(subsets(16, 8, rng, 50))
    assert len(drawn) == 50 and all(len(set(d)) == 8 and list(d) == sorted(d) for d in drawn)


def test_self_consistency_is_the_mean_over_every_subset() -> None:
    # Sampled keys a(right), a(right), b, c: pairs {b, c} lose; ties go to the earliest member.
    p = pool(cot=draw("cot", ("a", True), [("a", True), ("a", True), ("b", False), ("c", False)]))
    pricer = Pricer(FREE)
    by_n = {n: pricer.estimate(p, Config(f"sc@{n}", "sc", n)) for n in (1, 2, 3, 4)}
    assert by_n[1] is not None and by_n[1].accuracy == pytest.approx(0.5)
    assert by_n[2] is not None and by_n[2].accuracy == pytest.approx(5 / 6)
    assert by_n[4] is not None and by_n[4].accuracy == 1.0
    assert by_n[3] is not None and by_n[3].generated == 30  # n candidates of 10 tokens


def test_ties_use_mean_logprob_when_every_member_has_one() -> None:
    ballots = [Ballot("b", 1.0, False, -2.0), Ballot("a", 1.0, True, -0.1)]
    assert winner(ballots, logprob_ties=True) is ballots[1]
    assert winner(ballots) is ballots[0]  # earliest without logprobs
    assert winner([Ballot("", 1.0, True)]) is None


def test_code_pass_at_n_is_the_unbiased_pass_at_k() -> None:
    specs = [("x", True), ("y", False), ("z", False), ("w", True), ("v", False)]
    p = pool(kind="code", code=draw("code", ("g", False), specs))
    pricer = Pricer(FREE)
    for n in range(1, 6):
        est = pricer.estimate(p, Config(f"code_pass@{n}", "code_pass", n))
        assert est is not None and est.accuracy == pytest.approx(pass_at_k(5, 2, n))


def test_program_vote_falls_back_to_the_greedy_chain_of_thought() -> None:
    silent = draw("program", ("", False), [("", False)] * 3)
    right_cot = pool(program=silent, cot=draw("cot", ("1", True), [("2", False)] * 3, tokens=50))
    est = Pricer(FREE).estimate(right_cot, Config("pot@2", "pot", 2))
    assert est is not None and est.accuracy == 1.0
    assert est.generated == 2 * 10 + 50  # two programs, then the greedy chain of thought


def test_the_hybrid_breaks_a_program_tie_with_chains_of_thought() -> None:
    programs = draw("program", ("7", False), [("8", True)])
    thoughts = draw("cot", ("8", True), [("8", True), ("8", True)])
    p = pool(program=programs, cot=thoughts)
    plain = Pricer(FREE).estimate(p, Config("pot@2", "pot", 2))
    hybrid = Pricer(FREE).estimate(p, Config("hybrid@2+cot2", "pot", 2, cot=2))
    assert plain is not None and plain.accuracy == 0.0  # tie: the greedy program came first
    assert hybrid is not None and hybrid.accuracy == 1.0


def test_early_stopping_replays_the_strategy_waves_and_rule() -> None:
    unanimous = pool(program=draw("program", ("5", True), [("5", True)] * 8), cot=draw("cot", ("5", True), []))
    full = Pricer(FREE, stop).estimate(unanimous, Config("pot@9", "pot", 9))
    early = Pricer(FREE, stop).estimate(unanimous, Config("pot@9:es", "pot", 9, early_stop=True))
    assert full is not None and full.generated == 90
    assert early is not None and early.generated == 30 and early.accuracy == 1.0  # decided after 3
    assert Pricer(FREE).estimate(unanimous, Config("pot@9:es", "pot", 9, early_stop=True)) is None


@pytest.mark.parametrize(("total", "first"), [(1, 3), (4, 3), (9, 3), (17, 2), (8, 8)])
def test_wave_sizes_match_the_strategies(total: int, first: int) -> None:
    assert _waves(total, first) == wave_sizes(total, first)


def test_the_cascade_escalates_only_unsettled_votes() -> None:
    split_vote = pool(cot=draw("cot", ("1", True), [("1", True), ("2", False)]))
    settled = pool(cot=draw("cot", ("1", False), [("1", False), ("1", False)]))
    large = pool(cot=draw("cot", ("1", True), [("1", True), ("1", True)], tokens=100))
    sc2 = Config("sc@2", "sc", 2)
    pricer = Pricer(FREE)
    # The gate is the shipped calibrated confidence, as served: two agreeing samples are about 0.74.
    up = cascade(pricer, pricer, split_vote, large, sc2, sc2, threshold=0.7)
    kept = cascade(pricer, pricer, settled, large, sc2, sc2, threshold=0.7)
    assert up is not None and up.escalated == 1.0 and up.accuracy == 1.0 and up.generated == 20 + 200
    assert kept is not None and kept.escalated == 0.0 and kept.accuracy == 0.0 and kept.generated == 20


def test_the_cascade_gates_on_the_calibrated_confidence_not_the_share() -> None:
    """A unanimous vote of one sample has share 1.0 but a confidence near 0.4: it escalates."""
    one = pool(cot=draw("cot", ("1", False), [("1", False)]))
    large = pool(cot=draw("cot", ("1", True), [("1", True)], tokens=100))
    sc1 = Config("sc@1", "sc", 1)
    pricer = Pricer(FREE)
    run = next(pricer.outcomes(one, sc1, random.Random(0)))
    assert run.agreement == 1.0 and run.signals is not None
    text = prompt_text(one)
    model = shipped()
    assert model.probability(with_prompt(run.signals, text, model)) < 0.75
    assert unsettled(run, 0.75, text) and not unsettled(run, 0.3, text)
    up = cascade(pricer, pricer, one, large, sc1, sc1, threshold=0.75)
    assert up is not None and up.escalated == 1.0 and up.accuracy == 1.0
    # A lone sample can never be surer than this, so the served cascade skips it: only the large
    # model's sample is spent.
    assert hopeless(sc1, text, 0.75) and up.generated == 100
    assert not hopeless(sc1, text, 0.3) and not hopeless(Config("cot_greedy", "cot_greedy"), text, 0.99)


def test_latency_model_is_fitted_on_the_pools_calls() -> None:
    p = pool(cot=draw("cot", ("1", True), [("1", True)] * 4))
    model = fit_latency([p])
    assert model.prefill_s >= 0 and model.step_s >= 0 and model.step_s_per_seq >= 0
    for i, call in enumerate(p.draws["cot"].calls):
        longest = max(c.completion_tokens for c in p.draws["cot"].candidates if c.call == i)
        predicted = model.call(call.n, call.prompt_tokens - call.cached_tokens, longest)
        assert predicted == pytest.approx(call.wall_s, abs=1e-6)


def test_table_has_rows_per_kind_and_overall_for_every_n() -> None:
    pools = [
        pool("a", "arithmetic", cot=draw("cot", ("1", True), [("1", True)] * 4),
             program=draw("program", ("1", True), [("1", True)] * 4)),
        pool("b", "counting", cot=draw("cot", ("2", False), [("1", True)] * 4),
             program=draw("program", ("", False), [("1", True)] * 4)),
    ]  # fmt: skip
    configs = default_configs(4)
    rows = table(pools, price_all(Pricer(FREE, stop), pools, configs))
    names = {r.config for r in rows if r.group == "all"}
    assert {"cot_greedy", "sc@4", "pot@5", "pot@5:es", "hybrid@4+cot2"} <= names
    assert {r.group for r in rows} == {"arithmetic", "counting", "all"}
    greedy = next(r for r in rows if r.group == "all" and r.config == "cot_greedy")
    assert greedy.accuracy == 0.5 and greedy.problems == 2


def test_the_confidence_replays_are_the_pricers_runs() -> None:
    """The confidence is fitted on the pricing's own runs: the replays' mean correctness is the
    priced accuracy, and every run carries the signals the priced cascade escalates on."""
    from evaluation.confidence.rows import replays

    pools = [
        pool("a", cot=draw("cot", ("1", True), [("1", True), ("2", False), ("1", True), ("3", False)]),
             program=draw("program", ("", False), [("1", True), ("", False), ("2", False), ("1", True)])),
        pool("b", cot=draw("cot", ("4", False), [("4", False)] * 4),
             program=draw("program", ("", False), [("", False)] * 4)),
    ]  # fmt: skip
    pricer = Pricer(FREE)
    checked = 0
    for p in pools:
        for c in [c for c in default_configs(4) if not c.early_stop and c.family in ("cot_greedy", "sc", "pot")]:
            runs = replays(p, c, limit=pricer.limit)
            estimate = pricer.estimate(p, c)
            assert estimate is not None and runs, c.name
            assert sum(r.correct for r in runs) / len(runs) == pytest.approx(estimate.accuracy), c.name
            checked += len(runs)
    assert checked > 20
