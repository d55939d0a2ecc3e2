"""One contract, every strategy: the same adversarial scenarios run against each registered
strategy with scripted policies and verifiers (TreeQuest-style contract tests)."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import ReasoningDelta
from services.search.run import replay
from services.search.run import run_search as _run_search
from services.search.strategies import REGISTRY
from services.search.trace import compare_choices
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, contains, stepwise
from tests.helpers.search_jobs import STRATEGY_CASES, case_job

T = orchestrator_pb2
ALL = sorted(REGISTRY)
GENERATING_ACTIONS = {"generate", "expand", "rollout", "refine", "think", "answer", "program", "tests"}


async def run_search(job: T.SearchJob, policy: Any, verifier: Any, *args: Any, **kwargs: Any) -> Any:
    """The search, with the scripted policy also as the escalation deployment (the cascade's)."""
    kwargs.setdefault("escalation", policy)
    return await _run_search(job, policy, verifier, *args, **kwargs)


def test_every_registered_strategy_has_a_contract_case() -> None:
    assert set(STRATEGY_CASES) == set(REGISTRY)


def check_accounting(result: T.SearchResult, trace: T.SearchTrace, budget: int) -> None:
    spent = sum(n.tokens for n in trace.nodes if n.action in GENERATING_ACTIONS)
    assert result.budget_used.generated_tokens == spent
    assert result.budget_used.generated_tokens <= budget
    assert result.candidates_generated == sum(1 for n in trace.nodes if n.action in GENERATING_ACTIONS)
    for node in trace.nodes:
        assert math.isfinite(node.score) and 0.0 <= node.score <= 1.0
    assert trace.nodes[0].action == "prompt"
    ids = {n.id for n in trace.nodes}
    assert all(n.parent_id in ids for n in trace.nodes[1:])


@pytest.mark.parametrize("name", ALL)
async def test_completes_with_an_answer(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42", "41", "42"]))
    verifier = ScriptedVerifier(contains("42"))
    result, trace = await run_search(case_job(name), policy, verifier)
    assert result.termination in (T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED), result.error
    assert result.answer.strip()
    assert result.strategy == name
    assert any(n.chosen for n in trace.nodes[1:])
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_all_candidates_identical(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["7"]))
    result, trace = await run_search(case_job(name), policy, ScriptedVerifier(contains("7")))
    assert result.termination in (T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)
    if name != "budget_forcing":  # its answer is the text after "Final Answer:"
        assert "answer is 7" in result.answer
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_all_wrong(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["1", "2", "3"]))
    verifier = ScriptedVerifier(lambda text: 0.0)
    result, trace = await run_search(case_job(name), policy, verifier)
    assert result.termination == T.TERMINATION_COMPLETED
    assert result.answer.strip()
    assert not result.verifier_passed
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_empty_expansion_every_call(name: str) -> None:
    policy = ScriptedPolicy(lambda call, i, seed: "")
    result, trace = await run_search(case_job(name), policy, ScriptedVerifier(contains("x")))
    assert result.termination == T.TERMINATION_COMPLETED, result.error
    assert len(policy.calls) <= 6  # an empty expansion must not loop
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_engine_returns_no_candidates_mid_search(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["5", "6"]), empty_on_call=2)
    result, trace = await run_search(case_job(name), policy, ScriptedVerifier(contains("5")))
    assert result.termination in (T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED), result.error
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_budget_runs_out_mid_step(name: str) -> None:
    budget = 13  # a fraction of one step for most strategies
    policy = ScriptedPolicy(stepwise(["42", "41"], steps=4))
    result, trace = await run_search(case_job(name, tokens=budget), policy, ScriptedVerifier(contains("42")))
    assert result.termination in (T.TERMINATION_BUDGET, T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)
    assert result.budget_used.generated_tokens <= budget
    assert result.answer.strip()  # something was generated, so something is returned
    check_accounting(result, trace, budget)
    # With a budget so small, search strategies cannot run their full course (one-call
    # strategies shrink their one call; budget forcing plans its thinking to fit the budget).
    # A cascade whose inner self-consistency vote settles is that one call.
    if name not in ("single", "self_consistency", "best_of_n", "weighted_vote", "budget_forcing", "cascade"):
        assert result.termination == T.TERMINATION_BUDGET


@pytest.mark.parametrize("name", ALL)
async def test_policy_call_limit(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42"]))
    result, _ = await run_search(case_job(name, policy_calls=1), policy, ScriptedVerifier(contains("42")))
    assert len(policy.calls) == 1
    assert result.budget_used.policy_calls == 1
    assert result.termination in (T.TERMINATION_BUDGET, T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)


@pytest.mark.parametrize("score", [0.5, float("nan"), -3.0, 7.0, float("inf"), float("-inf")])
@pytest.mark.parametrize("name", ALL)
async def test_degenerate_verifier_scores(name: str, score: float) -> None:
    policy = ScriptedPolicy(stepwise(["42", "41"]))
    result, trace = await run_search(case_job(name), policy, ScriptedVerifier(lambda text: score))
    assert result.termination in (T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED), result.error
    assert result.answer.strip()
    assert math.isfinite(result.verifier_score) and 0.0 <= result.verifier_score <= 1.0
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_policy_error_mid_search_keeps_best_so_far(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42", "41"]), fail_on_call=2)
    result, trace = await run_search(case_job(name), policy, ScriptedVerifier(contains("42")))
    if len(policy.calls) < 2:  # a one-call strategy finished before the failure could happen
        assert result.termination in (T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)
        return
    assert result.termination == T.TERMINATION_ERROR
    assert "engine crashed" in result.error
    assert result.answer.strip()  # the best answer so far survives
    check_accounting(result, trace, 5000)


@pytest.mark.parametrize("name", ALL)
async def test_policy_error_on_first_call(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42"]), fail_on_call=1)
    result, _ = await run_search(case_job(name), policy, ScriptedVerifier(contains("42")))
    assert result.termination == T.TERMINATION_ERROR
    assert result.answer == ""
    assert result.budget_used.policy_calls == 1


@pytest.mark.parametrize("name", ALL)
async def test_verifier_error_keeps_best_so_far(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42", "41"]))
    verifier = ScriptedVerifier(contains("42"), fail_on_call=1)
    result, _ = await run_search(case_job(name, verifier="orm" if name == "single" else ""), policy, verifier)
    if not verifier.calls:  # strategies that never verify (self_consistency, budget_forcing)
        assert result.termination == T.TERMINATION_COMPLETED
        return
    assert result.termination == T.TERMINATION_ERROR
    assert "verifier crashed" in result.error
    assert result.answer.strip()


@pytest.mark.parametrize("name", ALL)
async def test_deadline(name: str) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0  # every look at the clock costs a second
        return now[0]

    policy = ScriptedPolicy(stepwise(["42"]))
    result, _ = await run_search(case_job(name, deadline=2.5), policy, ScriptedVerifier(contains("42")), clock=clock)
    assert result.termination in (T.TERMINATION_DEADLINE, T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)
    assert len(policy.calls) <= 2


@pytest.mark.parametrize("name", ALL)
async def test_cancellation(name: str) -> None:
    policy = ScriptedPolicy(stepwise(["42"]))
    result, _ = await run_search(
        case_job(name), policy, ScriptedVerifier(contains("42")), is_cancelled=lambda: len(policy.calls) >= 1
    )
    assert len(policy.calls) == 1
    assert result.termination in (T.TERMINATION_CANCELLED, T.TERMINATION_COMPLETED, T.TERMINATION_SOLVED)


@pytest.mark.parametrize("name", ALL)
async def test_replay_determinism(name: str) -> None:
    verifier = ScriptedVerifier(lambda text: (len(text) % 10) / 10)
    policy = ScriptedPolicy(stepwise(["42", "41", "40", "39"]))
    first, trace = await run_search(case_job(name), policy, verifier)
    again = ScriptedPolicy(stepwise(["42", "41", "40", "39"]))
    comparison, second, replayed = await replay(trace, again, verifier, escalation=again)
    assert comparison.matches and comparison.texts_match
    assert first.answer == second.answer
    # A different job seed makes different choices (the comparison can fail).
    other_job = case_job(name, seed=12345)
    _, other = await run_search(other_job, policy, verifier)
    assert not compare_choices(list(trace.nodes), list(other.nodes)).matches
    del replayed


@pytest.mark.parametrize("name", ALL)
async def test_every_model_call_streams_its_tokens_under_a_stable_label(name: str) -> None:
    deltas: list[ReasoningDelta] = []
    answer: list[str] = []

    async def on_answer(delta: str) -> None:
        answer.append(delta)

    job = case_job(name)
    job.stream_answer = True
    policy = ScriptedPolicy(stepwise(["42"]))
    result, trace = await run_search(
        job, policy, ScriptedVerifier(contains("42")), on_reasoning=deltas.append, on_answer=on_answer
    )
    assert all(d.kind in ("tokens", "event") and d.source and d.text for d in deltas)
    tokens = [d for d in deltas if d.kind == "tokens"]
    if name == "single":  # its one call decodes the answer: answer deltas, never the same text twice
        assert not tokens and "".join(answer) == result.answer
        return
    assert tokens, "no model tokens streamed"
    texts: dict[str, str] = {}
    for d in tokens:
        assert re.fullmatch(r"[a-z]+ \d+|beam \d+\.\d+", d.source), d.source
        texts[d.source] = texts.get(d.source, "") + d.text
    # One label, one candidate: what streamed under it is exactly a generated candidate's text.
    drawn = [n.text for n in trace.nodes if n.action in GENERATING_ACTIONS]
    assert all(text in drawn for text in texts.values())
    # Every candidate of every streamed call has its own label (the scripted texts are never empty).
    assert len(texts) == sum(c.n for c in policy.calls if c.streamed)


@pytest.mark.parametrize("name", ALL)
async def test_a_quiet_job_streams_nothing_and_asks_for_no_stream(name: str) -> None:
    deltas: list[ReasoningDelta] = []
    job = case_job(name)
    job.quiet = True
    policy = ScriptedPolicy(stepwise(["42"]))
    await run_search(job, policy, ScriptedVerifier(contains("42")), on_reasoning=deltas.append)
    assert deltas == [] and not any(c.streamed for c in policy.calls)
