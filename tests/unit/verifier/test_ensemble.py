"""The weighted ensemble: validation, weighted mean, members that could not judge."""

from __future__ import annotations

import math

import pytest

from services.common.errors import InvalidArgument
from services.verifier.ensemble import combine, validate_weights
from services.verifier.registry import build_registry
from services.verifier.settings import VerifierSettings
from services.verifier.types import Message, Outcome, Verdict, VerifyJob, WeightedName
from tests.unit.verifier.scripted import ScriptedSandbox, label_policy


def test_weighted_mean_per_candidate() -> None:
    a = Outcome([Verdict(score=1.0, extracted_answer="4"), Verdict(score=0.0)])
    b = Outcome([Verdict(score=0.5, step_scores=[0.5]), Verdict(score=0.2)])
    first, second = combine([(WeightedName("a", 3.0), a), (WeightedName("b", 1.0), b)], 2)
    assert first.score == pytest.approx(0.875) and first.passed and first.extracted_answer == "4"
    assert first.step_scores == [0.5]
    assert second.score == pytest.approx(0.05) and not second.passed


def test_a_member_that_erred_drops_out_of_that_candidate() -> None:
    a = Outcome([Verdict(error="sandbox error: x")])
    b = Outcome([Verdict(score=0.4)])
    (v,) = combine([(WeightedName("a", 5.0), a), (WeightedName("b", 1.0), b)], 1)
    assert v.score == pytest.approx(0.4) and not v.error and "skipped" in v.feedback
    (only_error,) = combine([(WeightedName("a", 1.0), a)], 1)
    assert only_error.error == "a: sandbox error: x"


def test_nan_and_out_of_range_member_scores_are_cleaned() -> None:
    a = Outcome([Verdict(score=math.nan)])
    b = Outcome([Verdict(score=3.0)])
    (v,) = combine([(WeightedName("a", 1.0), a), (WeightedName("b", 1.0), b)], 1)
    assert v.score == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("members", "field"),
    [
        ([], "ensemble"),
        ([WeightedName("orm", -1.0)], "ensemble[0].weight"),
        ([WeightedName("orm", math.nan)], "ensemble[0].weight"),
        ([WeightedName("orm", 0.0), WeightedName("prm", 0.0)], "ensemble"),
        ([WeightedName("nope", 1.0)], "ensemble[0].name"),
        ([WeightedName("orm", 1.0), WeightedName("ensemble", 1.0)], "ensemble[1].name"),
        ([WeightedName("orm", 1.0), WeightedName("orm", 2.0)], "ensemble[1].name"),
    ],
)
def test_invalid_ensembles(members: list[WeightedName], field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        validate_weights(members, lambda n: n in {"orm", "prm", "math_equivalence"})
    assert err.value.field == field


def registry():  # type: ignore[no-untyped-def]
    policy = label_policy(math.log(0.2), math.log(0.8))
    return build_registry(
        VerifierSettings(), policy, ScriptedSandbox(lambda c, t: (True, "EXEC_STATUS_OK", ""))
    ), policy


def test_members_are_validated_too() -> None:
    reg, _ = registry()
    job = VerifyJob(
        verifier="ensemble",
        candidates=("4",),
        problem=(Message("user", "2+2?"),),
        ensemble=(WeightedName("math_equivalence", 1.0), WeightedName("orm", 1.0)),
    )
    with pytest.raises(InvalidArgument) as err:
        reg.get("ensemble").validate(job)
    assert err.value.field == "reference"


async def test_rule_and_orm_combined_with_usage() -> None:
    reg, policy = registry()
    job = VerifyJob(
        verifier="ensemble",
        candidates=("The answer is 4.", "The answer is 5."),
        problem=(Message("user", "2+2?"),),
        reference="4",
        ensemble=(WeightedName("math_equivalence", 3.0), WeightedName("orm", 1.0), WeightedName("prm", 0.0)),
    )
    kind = reg.get("ensemble")
    kind.validate(job)
    out = await kind.verify(job)
    right, wrong = out.verdicts
    assert right.score == pytest.approx((3 * 1.0 + 0.2) / 4) and right.passed
    assert wrong.score == pytest.approx(0.2 / 4) and not wrong.passed
    assert out.spend.policy_calls == 2 and len(policy.calls) == 2  # the zero-weight PRM is not run
