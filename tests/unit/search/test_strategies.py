"""Strategy-specific behaviour with scripted policies and verifiers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.common.errors import InvalidArgument
from services.gen.ttc.v1 import orchestrator_pb2 as T
from services.search.interfaces import Candidate
from services.search.presentation import estimate_tokens
from services.search.run import run_search, validate_job
from services.search.strategies.ab_mcts import mixed_model_draw
from services.search.strategies.mcts import TreeNode, priors, puct
from services.search.strategies.voting import vote
from tests.helpers.search_fakes import (
    PolicyCall,
    ScriptedPolicy,
    ScriptedVerifier,
    answers_by_seed,
    contains,
    stepwise,
)
from tests.helpers.search_jobs import make_job


def by_index(answers: list[str]):
    """Candidate i of every call answers answers[i] (independent of seeds)."""

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        return f"Reasoning.\n\nThe answer is {answers[index % len(answers)]}."

    return respond


# -- voting --------------------------------------------------------------------------------
async def test_self_consistency_majority_and_spellings() -> None:
    policy = ScriptedPolicy(by_index(["1,000", "999", "1000.0", "\\boxed{1000}", "999"]))
    result, trace = await run_search(make_job("self_consistency", n=5), policy, ScriptedVerifier(contains("x")))
    assert result.answer == "The answer is 1000."  # the value, rendered as a short sentence
    assert "1,000" in result.reasoning  # the earliest member of the winning cluster is the evidence
    vote_node = next(n for n in trace.nodes if n.action == "vote")
    assert vote_node.text == "1000" and vote_node.visits == 3
    assert len(policy.calls) == 1 and policy.calls[0].n == 5


def test_vote_tie_prefers_higher_logprob_then_earliest() -> None:
    cands = [
        Candidate("The answer is 1.", logprobs=(-2.0,)),
        Candidate("The answer is 2.", logprobs=(-0.5,)),
        Candidate("The answer is 1.", logprobs=(-2.0,)),
        Candidate("The answer is 2.", logprobs=(-0.5,)),
    ]
    winner = vote(["1", "2", "1", "2"], [1.0] * 4, cands)
    assert winner is not None and winner.key == "2"
    no_lp = [Candidate(c.text) for c in cands]
    winner = vote(["1", "2", "1", "2"], [1.0] * 4, no_lp)
    assert winner is not None and winner.key == "1"  # earliest first occurrence


def test_vote_ignores_answerless_candidates_unless_all_are() -> None:
    cands = [Candidate("no idea"), Candidate("no clue"), Candidate("The answer is 3.")]
    winner = vote(["", "", "3"], [1.0] * 3, cands)
    assert winner is not None and winner.key == "3"
    winner = vote(["", ""], [1.0] * 2, cands[:2])
    assert winner is not None and winner.key == ""
    assert vote([], [], []) is None


async def test_weighted_vote_lets_the_verifier_outvote_the_majority() -> None:
    policy = ScriptedPolicy(by_index(["5", "5", "5", "8", "8"]))
    verifier = ScriptedVerifier(lambda t: 0.9 if "is 8" in t else 0.1)
    result, _ = await run_search(make_job("weighted_vote", n=5), policy, verifier)
    assert "answer is 8" in result.answer
    assert len(verifier.calls) == 1 and len(verifier.calls[0].candidates) == 5
    sc, _ = await run_search(make_job("self_consistency", n=5), policy, verifier)
    assert "answer is 5" in sc.answer


# -- best-of-N -----------------------------------------------------------------------------
@pytest.mark.parametrize("aggregation", ["min", "product", "mean", "last"])
async def test_best_of_n_picks_the_top_score_and_passes_aggregation(aggregation: str) -> None:
    policy = ScriptedPolicy(by_index(["1", "2", "3", "4"]))
    verifier = ScriptedVerifier(lambda t: 0.8 if "is 3" in t else 0.2)
    job = make_job("best_of_n", n=4, verifier="prm", params={"aggregation": aggregation})
    result, _ = await run_search(job, policy, verifier)
    assert "answer is 3" in result.answer
    assert math.isclose(result.verifier_score, 0.8)
    assert verifier.calls[0].verifier == "prm" and verifier.calls[0].aggregation == aggregation


async def test_best_of_n_tie_goes_to_the_earliest() -> None:
    policy = ScriptedPolicy(by_index(["1", "2", "3"]))
    result, _ = await run_search(make_job("best_of_n", n=3), policy, ScriptedVerifier(lambda t: 0.5))
    assert "answer is 1" in result.answer


async def test_best_of_n_with_rule_verifier_reports_solved() -> None:
    policy = ScriptedPolicy(by_index(["41", "42"]))
    verifier = ScriptedVerifier(contains("42"), passed=lambda t: "is 42" in t)
    job = make_job("best_of_n", n=2, verifier="math_equivalence", reference="42")
    result, _ = await run_search(job, policy, verifier)
    assert result.termination == T.TERMINATION_SOLVED and result.verifier_passed
    assert verifier.calls[0].reference == "42"


# -- beam search and DVTS --------------------------------------------------------------------
async def test_beam_search_expands_steps_with_prefix_and_stop() -> None:
    policy = ScriptedPolicy(stepwise(["42", "41", "40"], steps=2))
    verifier = ScriptedVerifier(lambda t: 0.9 if "is 42" in t else (0.6 if "variant 0" in t else 0.3))
    job = make_job("beam_search", params={"beam_width": 2, "expansion": 3, "max_steps": 5})
    result, trace = await run_search(job, policy, verifier)
    first = policy.calls[0]
    assert first.n == 6 and first.assistant_prefix == "" and first.stop == ("\n\n",)
    later = policy.calls[1:]
    assert later and all(c.n == 3 and c.assistant_prefix.endswith("\n\n") for c in later)
    assert result.answer == "The answer is 42."
    assert result.reasoning.startswith("Step 1:") and "The answer is" in result.reasoning
    assert result.termination == T.TERMINATION_COMPLETED
    # Every step's prefixes were scored in one verifier call.
    assert all(c.verifier == "prm" and c.aggregation == "last" for c in verifier.calls)
    expand_nodes = [n for n in trace.nodes if n.action == "expand"]
    assert all(n.parent_id for n in expand_nodes)


async def test_beam_search_keeps_the_best_scored_final_path() -> None:
    policy = ScriptedPolicy(stepwise(["42", "41", "40", "39"], steps=1))
    verifier = ScriptedVerifier(lambda t: 0.95 if "is 40" in t else 0.2)
    result, _ = await run_search(make_job("beam_search", params={"beam_width": 2, "expansion": 4}), policy, verifier)
    assert "answer is 40" in result.answer


async def test_dvts_runs_independent_subtrees() -> None:
    policy = ScriptedPolicy(stepwise(["42", "41"], steps=2))
    verifier = ScriptedVerifier(lambda t: 0.9 if "is 42" in t else 0.4)
    job = make_job("dvts", params={"subtrees": 3, "expansion": 2, "max_steps": 5})
    result, _ = await run_search(job, policy, verifier)
    assert policy.calls[0].n == 6  # the shared empty prefix: one call for all subtrees
    # Afterwards each subtree keeps one path and expands it by 2; subtrees that happen to hold
    # the same prefix share one call (here two of the three do in the second round).
    assert all(c.n % 2 == 0 for c in policy.calls[1:])
    assert sum(c.n for c in policy.calls[1:3]) == 6
    assert "answer is 42" in result.answer


# -- MCTS ------------------------------------------------------------------------------------
def test_puct_formula() -> None:
    parent = TreeNode("p", "", 0, visits=9)
    child = TreeNode("c", "", 0, prior=0.5, visits=2, value=1.0)
    assert math.isclose(puct(parent, child, 2.0), 0.5 + 2.0 * 0.5 * 3.0 / 3.0)
    fresh = TreeNode("f", "", 0, prior=0.5)
    assert math.isclose(puct(parent, fresh, 1.0), 0.0 + 0.5 * 3.0 / 1.0)


def test_priors_softmax_or_uniform() -> None:
    p = priors([-1.0, -2.0])
    assert math.isclose(sum(p), 1.0) and p[0] > p[1]
    assert priors([-1.0, None]) == [0.5, 0.5]
    assert priors([]) == []


async def test_mcts_visits_back_up_and_answer_follows_most_visited() -> None:
    policy = ScriptedPolicy(stepwise(["42", "41", "40"], steps=2))
    verifier = ScriptedVerifier(lambda t: 1.0 if "is 42" in t else 0.0)
    job = make_job("mcts", params={"simulations": 6, "expansion_width": 3, "c_puct": 1.0})
    result, trace = await run_search(job, policy, verifier)
    assert "answer is 42" in result.answer
    expand = [n for n in trace.nodes if n.action == "expand"]
    assert any(n.visits > 1 for n in expand)
    assert any(n.action == "rollout" for n in trace.nodes)
    assert all(c.logprobs for c in policy.calls if c.stop == ("\n\n",))


# -- AB-MCTS -----------------------------------------------------------------------------------
def test_mixed_model_draw_is_finite_and_seeded() -> None:
    groups = [[0.9, 0.8], [0.1], [0.5, 0.5, 0.4]]
    a = mixed_model_draw(np.random.default_rng(1), groups)
    b = mixed_model_draw(np.random.default_rng(1), groups)
    assert a == b and len(a) == 4 and all(math.isfinite(x) for x in a)


@pytest.mark.parametrize("name", ["ab_mcts_a", "ab_mcts_m"])
async def test_ab_mcts_refines_with_feedback_and_stops_when_solved(name: str) -> None:
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        if call.messages[-1].role == "user" and "Feedback" in call.messages[-1].content:
            return "Revised.\n\nThe answer is 42."
        return "First try.\n\nThe answer is 41."

    policy = ScriptedPolicy(respond)
    verifier = ScriptedVerifier(lambda t: 1.0 if "is 42" in t else 0.2, passed=lambda t: "is 42" in t)
    job = make_job(name, n=30, verifier="math_equivalence", reference="42", params={"batch": 2})
    result, trace = await run_search(job, policy, verifier)
    assert result.termination == T.TERMINATION_SOLVED
    assert "answer is 42" in result.answer
    refine_calls = [c for c in policy.calls if len(c.messages) == 3]
    assert refine_calls and refine_calls[0].messages[1].role == "assistant"
    assert any(n.action == "refine" for n in trace.nodes)
    assert result.candidates_generated < 30  # stopped early


@pytest.mark.parametrize("name", ["ab_mcts_a", "ab_mcts_m"])
async def test_ab_mcts_batches_fresh_answers_in_one_call(name: str) -> None:
    policy = ScriptedPolicy(answers_by_seed(["1", "2", "3"]))
    job = make_job(name, n=4, params={"batch": 4})
    await run_search(job, policy, ScriptedVerifier(lambda t: 0.3))
    assert policy.calls[0].n == 4 and len(policy.calls) == 1


# -- budget forcing ---------------------------------------------------------------------------
async def test_budget_forcing_appends_wait_then_forces_the_answer() -> None:
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        if call.assistant_prefix.endswith("Final Answer:"):
            return " 42"
        return "short thought"

    policy = ScriptedPolicy(respond)
    job = make_job("budget_forcing", params={"min_thinking_tokens": 5, "max_thinking_tokens": 50, "max_waits": 2})
    result, trace = await run_search(job, policy, ScriptedVerifier(contains("x")))
    waits = [n for n in trace.nodes if n.action == "wait"]
    assert len(waits) == 2
    assert policy.calls[1].assistant_prefix.endswith(" Wait,")
    assert policy.calls[-1].assistant_prefix.endswith("</think>\nFinal Answer:")
    assert (result.answer, result.reasoning) == ("The answer is 42.", "Final Answer: 42")
    assert result.answer_tokens == estimate_tokens(result.answer)
    assert result.budget_used.generated_tokens == 2 * 3 + 1


async def test_budget_forcing_caps_thinking() -> None:
    policy = ScriptedPolicy(lambda call, i, s: " ".join(["hmm"] * 100))
    job = make_job("budget_forcing", params={"max_thinking_tokens": 10})
    result, _ = await run_search(job, policy, ScriptedVerifier(contains("x")))
    assert policy.calls[0].max_tokens == 10
    assert "</think>" in policy.calls[1].assistant_prefix
    assert result.termination == T.TERMINATION_COMPLETED


def test_budget_forcing_rejects_min_above_max() -> None:
    with pytest.raises(InvalidArgument) as err:
        validate_job(make_job("budget_forcing", params={"min_thinking_tokens": 9, "max_thinking_tokens": 5}))
    assert err.value.field == "strategy.params.min_thinking_tokens"


# -- revision ---------------------------------------------------------------------------------
async def test_revision_feeds_back_and_stops_when_passed() -> None:
    def respond(call: PolicyCall, index: int, seed: int) -> str:
        if len(call.messages) > 1 and "expected 42" in call.messages[-1].content:
            return "The answer is 42."
        return "The answer is 40."

    policy = ScriptedPolicy(respond)
    verifier = ScriptedVerifier(lambda t: 1.0 if "42" in t else 0.0, passed=lambda t: "42" in t)
    verifier_feedback = verifier.verify

    async def with_feedback(call):  # type: ignore[no-untyped-def]
        out = await verifier_feedback(call)
        from dataclasses import replace

        return replace(out, verdicts=tuple(replace(v, feedback="test failed: expected 42") for v in out.verdicts))

    verifier.verify = with_feedback  # type: ignore[method-assign]
    job = make_job("revision", n=1, verifier="code_tests", params={"rounds": 3, "code": {"tests": [{"name": "t"}]}})
    result, trace = await run_search(job, policy, verifier)
    assert result.termination == T.TERMINATION_SOLVED
    assert result.answer == "The answer is 42."
    assert len(policy.calls) == 2  # one attempt, one revision, then solved
    assert policy.calls[1].messages[1].content == "The answer is 40."
    assert [n.action for n in trace.nodes[1:]] == ["generate", "refine"]


async def test_revision_keeps_the_best_attempt_when_revisions_get_worse() -> None:
    calls = {"n": 0}

    def respond(call: PolicyCall, index: int, seed: int) -> str:
        calls["n"] += 1
        return f"The answer is {calls['n']}."

    verifier = ScriptedVerifier(lambda t: 0.9 if "is 1." in t else 0.1)
    result, _ = await run_search(make_job("revision", n=1, params={"rounds": 3}), ScriptedPolicy(respond), verifier)
    assert result.answer == "The answer is 1."


# -- validation -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "params", "verifier", "field"),
    [
        ("beam_search", {"beam_width": 0}, "", "strategy.params.beam_width"),
        ("beam_search", {"beam_width": 1.5}, "", "strategy.params.beam_width"),
        ("mcts", {"c_puct": "high"}, "", "strategy.params.c_puct"),
        ("best_of_n", {"aggregation": "max"}, "prm", "strategy.params.aggregation"),
        ("best_of_n", {}, "oracle", "strategy.verifier"),
        ("best_of_n", {}, "code_tests", "strategy.verifier"),
        ("best_of_n", {}, "format", "strategy.verifier"),
        ("best_of_n", {"ensemble": {"orm": -1}}, "ensemble", "strategy.params.ensemble.orm"),
        ("best_of_n", {"ensemble": {"orm": 0, "prm": 0}}, "ensemble", "strategy.params.ensemble"),
        ("best_of_n", {"ensemble": {"ensemble": 1}}, "ensemble", "strategy.params.ensemble.ensemble"),
        ("dvts", {"step_max_tokens": 100000}, "", "strategy.params.step_max_tokens"),
        ("revision", {"rounds": 99}, "", "strategy.params.rounds"),
        ("single", {}, "", "strategy.n"),
    ],
)
def test_bad_params_name_the_field(name: str, params: dict, verifier: str, field: str) -> None:
    job = make_job(name, params=params, verifier=verifier, n=3 if name == "single" else 0)
    with pytest.raises(InvalidArgument) as err:
        validate_job(job)
    assert err.value.field == field
