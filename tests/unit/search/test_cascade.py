"""The cascade: a settled small vote stands; an unsettled one is handed to the larger deployment,
whose answer is returned with both models' spend; no escalation deployment is refused."""

from __future__ import annotations

import json

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import Message
from services.search.run import run_search
from services.search.strategies.cascade import best_case, vote_share
from services.search.strategies.program import ProgramOfThought
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.signals import answer_confidence
from services.search.strategies.voting import SelfConsistency
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains
from tests.helpers.search_jobs import make_job

SC = {"inner": "self_consistency", "threshold": 0.75}


def _job() -> orchestrator_pb2.SearchJob:
    return make_job("cascade", n=4, params=SC)


async def test_a_settled_vote_stands_and_the_large_model_is_never_called() -> None:
    small = ScriptedPolicy(answers_by_seed(["42"] * 4))
    large = ScriptedPolicy(answers_by_seed(["41"] * 4))
    result, trace = await run_search(_job(), small, ScriptedVerifier(contains("42")), escalation=large)
    assert "42" in result.answer and not large.calls
    assert [n.action for n in trace.nodes].count("settled") == 1


async def test_an_unsettled_vote_escalates_and_both_spends_count() -> None:
    small = ScriptedPolicy(answers_by_seed(["1", "2", "3", "4", "5", "6", "7"]))
    large = ScriptedPolicy(answers_by_seed(["42"] * 4))
    result, trace = await run_search(_job(), small, ScriptedVerifier(contains("42")), escalation=large)
    assert "42" in result.answer
    assert small.calls and large.calls
    assert result.candidates_generated == 8  # four on each model, one budget
    escalate = [n for n in trace.nodes if n.action == "escalate"]
    assert len(escalate) == 1 and escalate[0].score < 0.75


async def test_a_cascade_without_an_escalation_deployment_is_refused() -> None:
    small = ScriptedPolicy(answers_by_seed(["42"] * 4))
    result, _ = await run_search(_job(), small, ScriptedVerifier(contains("42")))
    assert result.termination == orchestrator_pb2.TERMINATION_ERROR and not result.answer and not small.calls
    error = json.loads(result.error)
    assert error["code"] == "INVALID_ARGUMENT" and "TTC_ORCHESTRATOR_ESCALATION_MODEL" in error["message"]


async def test_a_small_run_that_could_not_settle_it_is_skipped() -> None:
    """One small sample on "What is 6*7?" is at most about 0.72 sure, even right: below 0.75 it
    could only add its tokens to the large model's, so only the large model runs."""
    small = ScriptedPolicy(answers_by_seed(["42"]))
    large = ScriptedPolicy(answers_by_seed(["42"]))
    job = make_job("cascade", n=1, params=SC)
    ceiling = answer_confidence(best_case(SelfConsistency(n=1)), (Message("user", "What is 6*7?"),))
    assert ceiling is not None and ceiling < 0.75
    result, trace = await run_search(job, small, ScriptedVerifier(contains("42")), escalation=large)
    assert "42" in result.answer and not small.calls and large.calls
    assert result.candidates_generated == 1
    (node,) = [n for n in trace.nodes if n.action == "escalate"]
    assert "small model skipped" in node.text and node.score == pytest.approx(ceiling)
    # The same request at a threshold a unanimous sample reaches runs the small model first.
    settled = make_job("cascade", n=1, params={**SC, "threshold": 0.5})
    result, _ = await run_search(settled, ScriptedPolicy(answers_by_seed(["42"])), ScriptedVerifier(contains("42")),
                                 escalation=ScriptedPolicy(answers_by_seed(["41"])))  # fmt: skip
    assert "42" in result.answer and result.candidates_generated == 1


def test_the_ceiling_is_a_unanimous_vote_of_every_ballot_the_inner_strategy_draws() -> None:
    pot = best_case(ProgramOfThought(n=4, cot=0))
    hybrid = best_case(ProgramOfThought(n=3, mode="hybrid", cot=2))
    sc = best_case(SelfConsistency(n=5))
    assert (pot.config, pot.votes, pot.vote_share, pot.distinct, pot.programs_agree) == ("pot", 4, 1.0, 1, None)
    assert (hybrid.config, hybrid.votes, hybrid.programs_agree) == ("hybrid", 5, True)
    assert (sc.config, sc.votes, sc.abstained) == ("sc", 5, 0)


def test_vote_share_counts_abstentions_against_the_winner() -> None:
    assert vote_share(Outcome(Choice("x", "n1", votes=3)), 4) == 0.75
    assert vote_share(Outcome(Choice("x", "n1", votes=2)), 8) == 0.25
    assert vote_share(Outcome(None), 4) == 0.0
    assert vote_share(Outcome(Choice("x", "n1", votes=1)), 0) == 0.0


def test_bad_parameters_name_their_field() -> None:
    from services.search.strategies.cascade import Cascade
    from services.search.strategies.config import StrategyInput

    with pytest.raises(InvalidArgument, match="threshold"):
        Cascade.from_input(StrategyInput(n=4, params={"threshold": 2}))
    with pytest.raises(InvalidArgument, match="inner"):
        Cascade.from_input(StrategyInput(n=4, params={"inner": "beam_search"}))
    with pytest.raises(InvalidArgument, match="bogus"):
        Cascade.from_input(StrategyInput(n=4, params={"bogus": 1}))
    with pytest.raises(InvalidArgument, match="large_n"):
        Cascade.from_input(StrategyInput(n=4, params={"large_n": 0}))


async def test_large_n_widens_the_vote_on_the_escalation_deployment() -> None:
    # Two split small samples (confidence about 0.3) escalate to a vote of 3.
    small = ScriptedPolicy(answers_by_seed(["41", "40"]))
    large = ScriptedPolicy(answers_by_seed(["42"] * 3))
    job = make_job("cascade", n=2, params={**SC, "large_n": 3})
    result, _ = await run_search(job, small, ScriptedVerifier(contains("42")), escalation=large)
    assert "42" in result.answer
    assert result.candidates_generated == 2 + 3  # two on the small model, three on the large


async def test_large_inner_runs_another_strategy_on_the_escalation_deployment() -> None:
    # A split small vote escalates to one greedy chain of thought on the large model.
    small = ScriptedPolicy(answers_by_seed(["41", "40"]))
    large = ScriptedPolicy(answers_by_seed(["42"]))
    params = {**SC, "large_inner": "single", "large_params": {"greedy": True}}
    result, _ = await run_search(make_job("cascade", n=2, params=params), small, ScriptedVerifier(contains("42")),
                                 escalation=large)  # fmt: skip
    assert "42" in result.answer
    assert result.candidates_generated == 3
    assert [call.temperature for call in large.calls] == [0.0]  # greedy, whatever the job's temperature


def test_large_params_are_validated_by_the_large_strategy_and_name_their_field() -> None:
    from services.search.strategies.cascade import Cascade
    from services.search.strategies.config import StrategyInput
    from services.search.strategies.single import Single
    from services.search.strategies.voting import SelfConsistency

    made = Cascade.from_input(StrategyInput(n=2, params={"large_inner": "self_consistency", "large_n": 5}))
    assert isinstance(made.large, SelfConsistency)
    # Another strategy on the large model does not inherit the inner strategy's params.
    pot_only = {"mode": "program", "large_inner": "single"}
    assert isinstance(Cascade.from_input(StrategyInput(n=2, params=pot_only)).large, Single)
    with pytest.raises(InvalidArgument) as bad:
        Cascade.from_input(StrategyInput(n=2, params={"large_inner": "single", "large_params": {"bogus": 1}}))
    assert bad.value.field == "strategy.params.large_params.bogus"
    with pytest.raises(InvalidArgument, match="large_inner"):
        Cascade.from_input(StrategyInput(n=2, params={"large_inner": "mcts"}))
    with pytest.raises(InvalidArgument, match="large_params"):
        Cascade.from_input(StrategyInput(n=2, params={"large_params": 3}))
    with pytest.raises(InvalidArgument, match="n"):
        Cascade.from_input(StrategyInput(n=2, params={"large_inner": "single", "large_n": 2}))
