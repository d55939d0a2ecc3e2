"""Judge cost in pools and prices: a candidate's judge tokens and seconds round-trip through a
chunk (old chunks without them still load), and best-of-N and the weighted vote are charged
them (prompt tokens and latency, summed over the drawn); without them those configurations do
not apply."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from evaluation.pools.store import Draw, ProblemPool, read_chunk, write_chunk
from evaluation.pricing.pricer import Config, LatencyModel, Pricer
from tests.unit.evaluation.pool_fixtures import draw, pool

LATENCY = LatencyModel(prefill_s=0.001, step_s=0.01, step_s_per_seq=0.002)
TOKENS = (30, 60, 90)  # the three sampled candidates' judge tokens
SECONDS = (1.0, 2.0, 3.0)


def judged_pool(*, costs: bool = True) -> ProblemPool:
    """Sampled chains of thought a (right, score .9), b (wrong, .2), a (right, .4), each with
    the ORM's score and (when ``costs``) its judge tokens and seconds."""
    d = draw("cot", ("a", True), [("a", True), ("b", False), ("a", True)])
    scored = [d.candidates[0]]
    for c, score, tokens, seconds in zip(d.sampled, (0.9, 0.2, 0.4), TOKENS, SECONDS, strict=True):
        cost = {"judge_tokens": {"orm": tokens}, "judge_s": {"orm": seconds}} if costs else {}
        scored.append(dataclasses.replace(c, scores={"orm": score}, **cost))  # type: ignore[arg-type]
    return pool(cot=dataclasses.replace(d, candidates=tuple(scored)))


def test_judge_costs_round_trip_and_old_candidates_load_and_store_as_before(tmp_path: Path) -> None:
    p = judged_pool()
    path = write_chunk(tmp_path, "calibration", 1, {"model": "m"}, [p])
    back = read_chunk(path).pools[0]
    assert back == p
    assert [c.judge_tokens for c in back.draws["cot"].sampled] == [{"orm": t} for t in TOKENS]
    assert [c.judge_s for c in back.draws["cot"].sampled] == [{"orm": s} for s in SECONDS]
    # a candidate no judge has costed is stored without the fields, as chunks were before them
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    greedy = rows[1]["draws"]["cot"]["candidates"][0]
    assert "judge_tokens" not in greedy and "judge_s" not in greedy
    assert rows[1]["draws"]["cot"]["candidates"][1]["judge_tokens"] == {"orm": 30}
    # and an old row without them loads with them empty
    old = ProblemPool.from_dict(rows[1])
    assert old.draws["cot"].greedy is not None and old.draws["cot"].greedy.judge_tokens == {}


@pytest.mark.parametrize("family", ["bon", "wvote"])
def test_bon_and_wvote_pay_the_judge_of_the_drawn(family: str) -> None:
    """Every one of the 3 pairs of the 3 sampled candidates costs the same policy tokens and
    decode time as self-consistency; the judge adds the pair's tokens to the prompt and its
    seconds to the latency: over the pairs, each candidate is drawn 2 times in 3."""
    p = judged_pool()
    pricer = Pricer(LATENCY)
    sc = pricer.estimate(p, Config("sc@2", "sc", 2))
    judged = pricer.estimate(p, Config(f"{family}@2:orm", family, 2, judge="orm"))  # type: ignore[arg-type]
    assert sc is not None and judged is not None
    assert judged.generated == sc.generated == 20
    assert judged.prompt == pytest.approx(sc.prompt + 2 / 3 * sum(TOKENS))
    assert judged.latency_s == pytest.approx(sc.latency_s + 2 / 3 * sum(SECONDS))
    # all three drawn: the judge scores all of them
    every = pricer.estimate(p, Config(f"{family}@3:orm", family, 3, judge="orm"))  # type: ignore[arg-type]
    sc3 = pricer.estimate(p, Config("sc@3", "sc", 3))
    assert every is not None and sc3 is not None
    assert every.prompt == sc3.prompt + 180 and every.latency_s == pytest.approx(sc3.latency_s + 6.0)


def test_one_pair_is_charged_exactly_its_own_judging() -> None:
    p = judged_pool()
    d: Draw = p.draws["cot"]
    pricer = Pricer(LATENCY)
    first, _, third = d.sampled
    outcome = pricer.sampled_vote(d, [first, third], Config("bon@2:orm", "bon", 2, judge="orm"))
    unjudged = pricer.sampled_vote(d, [first, third], Config("sc@2", "sc", 2))
    assert outcome.prompt == unjudged.prompt + 30 + 90
    assert outcome.latency_s == pytest.approx(unjudged.latency_s + 1.0 + 3.0)
    assert outcome.correct and outcome.agreement == 0.9  # the winner's judge score


def test_without_a_candidates_judge_cost_the_judged_configurations_do_not_apply() -> None:
    pricer = Pricer(LATENCY)
    unpriced = judged_pool(costs=False)
    for family in ("bon", "wvote"):
        config = Config(f"{family}@2:orm", family, 2, judge="orm")  # type: ignore[arg-type]
        assert not config.applies(unpriced) and pricer.estimate(unpriced, config) is None
        assert config.applies(judged_pool())
    # one candidate's cost missing is enough, as one missing score is
    p = judged_pool()
    d = p.draws["cot"]
    stripped = dataclasses.replace(d.candidates[2], judge_s={})
    partly = dataclasses.replace(
        p, draws={"cot": dataclasses.replace(d, candidates=(*d.candidates[:2], stripped, d.candidates[3]))}
    )
    assert not Config("bon@2:orm", "bon", 2, judge="orm").applies(partly)
    assert Config("sc@2", "sc", 2).applies(partly)
