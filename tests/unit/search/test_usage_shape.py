"""One budget-usage shape: ``BudgetUsage`` is ``ttc.v1.BudgetUse`` field for field, the
conversion carries every field, and judge tokens land in the verifier's prompt / generated
counts, never in the policy's."""

from __future__ import annotations

from dataclasses import fields

from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import BudgetUsage
from services.search.run import run_search, usage_to_proto
from tests.helpers.search_fakes import ScriptedPolicy, ScriptedVerifier, answers_by_seed, contains
from tests.helpers.search_jobs import make_job

PROTO_FIELDS = [f.name for f in orchestrator_pb2.BudgetUse.DESCRIPTOR.fields]


def distinct_usage() -> BudgetUsage:
    """Every field a different non-zero value, so a dropped or swapped field shows."""
    values: dict[str, int | float] = {}
    for i, f in enumerate(fields(BudgetUsage), start=1):
        values[f.name] = i + 0.25 if isinstance(f.default, float) else i
    return BudgetUsage(**values)  # type: ignore[arg-type]


def test_budget_usage_has_exactly_the_proto_fields() -> None:
    assert sorted(f.name for f in fields(BudgetUsage)) == sorted(PROTO_FIELDS)


def test_usage_to_proto_carries_every_field() -> None:
    usage = distinct_usage()
    message = usage_to_proto(usage)
    assert len(message.ListFields()) == len(PROTO_FIELDS)  # every field set (none left at 0)
    for f in fields(BudgetUsage):
        assert getattr(message, f.name) == getattr(usage, f.name), f.name


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
