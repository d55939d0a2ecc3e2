"""The cascade: a settled small vote stands; an unsettled one is handed to the larger deployment,
whose answer is returned with both models' spend; no escalation deployment is refused."""

from __future__ import annotations

import json

import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.run import run_search
from services.search.strategies.cascade import vote_share
from services.search.strategies.results import Choice, Outcome
from tests.unit.orchestrator.conftest import make_job
from tests.unit.orchestrator.fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains

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
    # One small sample (confidence about 0.4 for a lone chain of thought) escalates to a vote of 3.
    small = ScriptedPolicy(answers_by_seed(["41"]))
    large = ScriptedPolicy(answers_by_seed(["42"] * 3))
    job = make_job("cascade", n=1, params={**SC, "large_n": 3})
    result, _ = await run_search(job, small, ScriptedVerifier(contains("42")), escalation=large)
    assert "42" in result.answer
    assert result.candidates_generated == 1 + 3  # one on the small model, three on the large


async def test_large_inner_runs_another_strategy_on_the_escalation_deployment() -> None:
    # A lone small chain of thought escalates to one greedy chain of thought on the large model.
    small = ScriptedPolicy(answers_by_seed(["41"]))
    large = ScriptedPolicy(answers_by_seed(["42"]))
    params = {**SC, "large_inner": "single", "large_params": {"greedy": True}}
    result, _ = await run_search(make_job("cascade", n=1, params=params), small, ScriptedVerifier(contains("42")),
                                 escalation=large)  # fmt: skip
    assert "42" in result.answer
    assert result.candidates_generated == 2
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
