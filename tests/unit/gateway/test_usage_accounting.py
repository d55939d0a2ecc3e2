"""One meaning for every token count: the response's ``usage``, ``ttc.budget_used`` and
``ttc.spend`` are derived from ``ttc.v1.BudgetUse`` and carry every one of its fields.

If a field is added to ``BudgetUse`` and not carried through (the pydantic model, the role
breakdown, the OpenAI sums), a test here fails. Token fields are classified by name:
``*prompt_tokens``, ``*cached_tokens``, ``*generated_tokens``, with a ``verifier_`` or
``probe_`` prefix naming the role (none: the policy's).
"""

from __future__ import annotations

from typing import Any

import pytest

from services.gateway.formatting import chat_response, report_of
from services.gateway.protocol import BudgetUsed, RoleTokens, SpendByRole
from services.gateway.usage import usage_of
from services.gen.ttc.v1 import orchestrator_pb2
from services.jobs.record import JobRecord

FIELDS: list[Any] = list(orchestrator_pb2.BudgetUse.DESCRIPTOR.fields)
KINDS = ("prompt_tokens", "cached_tokens", "generated_tokens")
ROLES = ("verifier", "probe")  # prefixes; unprefixed token fields are the policy's
PROBE_KEYS = {"probe_prompt_tokens": "prompt_tokens", "probe_cached_tokens": "cached_tokens"}
PROBE_KEYS["probe_generated_tokens"] = "generated_tokens"


def role_and_kind(name: str) -> tuple[str, str]:
    kind = next(k for k in KINDS if name.endswith(k))
    prefix = name.removesuffix(kind).removesuffix("_")
    assert prefix in ("", *ROLES), f"BudgetUse.{name}: unknown role {prefix!r}"
    return prefix or "policy", kind


def distinct() -> tuple[orchestrator_pb2.SearchResult, JobRecord, dict[str, int | float]]:
    """A result and job record in which every BudgetUse field has its own value (probe fields
    come from the record, as in production)."""
    result = orchestrator_pb2.SearchResult(job_id="j", answer="42", answer_tokens=3, strategy="beam_search")
    record: dict[str, Any] = {"probe": {}}
    expected: dict[str, int | float] = {}
    for i, f in enumerate(FIELDS, start=1):
        value: int | float = i + 0.5 if f.type == f.TYPE_DOUBLE else 10 * i
        expected[f.name] = value
        if f.name in PROBE_KEYS:
            record["probe"][PROBE_KEYS[f.name]] = value
        else:
            setattr(result.budget_used, f.name, value)
    return result, JobRecord.model_validate(record), expected


def test_every_token_field_has_a_role_and_a_kind() -> None:
    for f in FIELDS:
        if f.name.endswith("_tokens"):
            role_and_kind(f.name)


def test_ttc_budget_used_is_budget_use_field_for_field() -> None:
    number = {f.name: float if f.type == f.TYPE_DOUBLE else int for f in FIELDS}
    assert {name: field.annotation for name, field in BudgetUsed.model_fields.items()} == number
    result, record, expected = distinct()
    assert report_of(result, record).budget_used.model_dump() == expected


def test_spend_by_role_carries_every_token_field_and_the_sandbox() -> None:
    result, record, expected = distinct()
    spend = report_of(result, record).spend
    seen = set()
    for name, value in expected.items():
        if not name.endswith("_tokens"):
            continue
        role, kind = role_and_kind(name)
        assert getattr(getattr(spend, role), kind) == value, name
        seen.add((role, kind))
    assert seen == {(r, k) for r in ("policy", *ROLES) for k in KINDS}
    assert set(SpendByRole.model_fields) == {"policy", *ROLES, "sandbox"}
    assert set(RoleTokens.model_fields) == set(KINDS)
    assert spend.sandbox.runs == expected["sandbox_runs"]
    assert spend.sandbox.seconds == expected["sandbox_seconds"]


def test_usage_sums_every_role_by_kind() -> None:
    result, record, expected = distinct()
    usage = usage_of(result, record)

    def total(kind: str) -> int | float:
        return sum(v for n, v in expected.items() if n.endswith("_tokens") and role_and_kind(n)[1] == kind)

    assert usage.prompt_tokens == total("prompt_tokens")
    assert usage.prompt_tokens_details.cached_tokens == total("cached_tokens")
    assert usage.completion_tokens == total("generated_tokens")
    assert usage.completion_tokens_details.reasoning_tokens == usage.completion_tokens - 3
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_beam_search_with_a_prm_prices_judge_prompts_as_prompt_tokens() -> None:
    """A measured beam search with a PRM: the engine prefilled 1,710 tokens and generated 373;
    the response had said 219 prompt and 1,864 completion tokens."""
    result = orchestrator_pb2.SearchResult(job_id="j", answer="12", answer_tokens=115)
    used = result.budget_used
    used.prompt_tokens, used.generated_tokens = 219, 373
    used.verifier_prompt_tokens = 1_491  # PRM Score calls: judge prompts + scored steps
    response = chat_response(result, JobRecord(kind="chat.completion"))
    assert response.usage.prompt_tokens == 1_710
    assert response.usage.completion_tokens == 373
    assert response.usage.completion_tokens_details.reasoning_tokens == 373 - 115
    assert response.ttc is not None
    assert response.ttc.spend.verifier == RoleTokens(prompt_tokens=1_491)
    assert response.ttc.spend.policy == RoleTokens(prompt_tokens=219, generated_tokens=373)


@pytest.mark.parametrize("probe", [None, {}, {"prompt_tokens": -4, "generated_tokens": "7"}])
def test_missing_or_odd_probe_records_are_safe(probe: Any) -> None:
    result = orchestrator_pb2.SearchResult(job_id="j", answer="x", answer_tokens=1)
    result.budget_used.generated_tokens = 5
    usage = usage_of(result, JobRecord.model_validate({"probe": probe}))
    expected_probe = 7 if probe and "generated_tokens" in probe else 0
    assert usage.completion_tokens == 5 + expected_probe
    assert usage.prompt_tokens == 0  # a negative count is clamped, never subtracted


def test_early_stop_savings_are_reported_only_when_there_are_some() -> None:
    result = orchestrator_pb2.SearchResult(job_id="j", strategy="program_of_thought", candidates_generated=3)
    assert report_of(result, JobRecord()).early_stop is None
    result.candidates_saved, result.tokens_saved = 5, 260
    early = report_of(result, JobRecord()).early_stop
    assert early is not None and (early.candidates_saved, early.tokens_saved) == (5, 260)
