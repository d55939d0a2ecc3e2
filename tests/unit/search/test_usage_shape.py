"""One budget-usage shape: a search's ``Budget`` reports its spend as ``ttc.v1.BudgetUse``
itself, counting into every field but the gateway's probe, and judge tokens land in the
verifier's prompt / generated counts, never in the policy's."""

from __future__ import annotations

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.budget import Budget, Limits
from services.search.interfaces import Candidate, Generation, Verdict, Verification
from services.search.run import run_search
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains
from tests.helpers.search_jobs import make_job

PROTO_FIELDS = [f.name for f in orchestrator_pb2.BudgetUse.DESCRIPTOR.fields]
GATEWAYS = {"probe_prompt_tokens", "probe_cached_tokens", "probe_generated_tokens"}  # the gateway fills them in


def test_a_budget_that_spent_everything_counts_into_every_field_but_the_probes() -> None:
    """A field added to ``BudgetUse`` that the budget does not count fails here."""
    now = [0.0]
    budget = Budget(Limits(1000), clock=lambda: now[0])
    budget.charge_generation(Generation((Candidate("x", completion_tokens=5),), prompt_tokens=9, cached_tokens=4))
    budget.charge_verification(Verification((Verdict(0.5),), prompt_tokens=7, completion_tokens=3, cached_tokens=2))
    budget.charge_execution(0.25)
    now[0] = 1.5
    used = budget.usage()
    assert isinstance(used, orchestrator_pb2.BudgetUse)
    assert sorted(f.name for f, _ in used.ListFields()) == sorted(set(PROTO_FIELDS) - GATEWAYS)
    assert (used.generated_tokens, used.prompt_tokens, used.cached_tokens, used.policy_calls) == (5, 9, 4, 1)
    assert (used.sandbox_runs, used.sandbox_seconds, used.wall_seconds) == (1, 0.25, 1.5)


async def test_judge_tokens_are_the_verifiers_prompt_tokens_not_the_policys() -> None:
    policy = ScriptedPolicy(answers_by_seed(["42", "41"]))
    verifier = ScriptedVerifier(contains("42"), tokens_per_candidate=7)
    result, trace = await run_search(make_job("best_of_n", n=4, verifier="orm"), policy, verifier)
    used = result.budget_used
    assert used.verifier_calls >= 1
    assert used.verifier_prompt_tokens == 7 * 4  # every candidate's judge prompt, prefilled
    assert used.verifier_generated_tokens == 0
    # The policy's counts are the policy's alone: its candidates' tokens and its prompts.
    assert used.generated_tokens == sum(n.tokens for n in trace.nodes if n.action == "generate")
    assert used.prompt_tokens == 10 * used.policy_calls
    assert (used.probe_prompt_tokens, used.probe_generated_tokens) == (0, 0)  # the gateway's to fill
