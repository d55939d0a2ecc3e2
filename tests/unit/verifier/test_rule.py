"""Rule verifiers: mathematical equivalence and format checks."""

from __future__ import annotations

import pytest

from services.common.errors import InvalidArgument
from services.verifier.rule import FormatCheck, MathEquivalence
from services.verifier.types import VerifyJob


def job(*candidates: str, **kw: object) -> VerifyJob:
    return VerifyJob(verifier="x", candidates=candidates, **kw)  # type: ignore[arg-type]


async def test_fraction_and_decimal_are_equivalent() -> None:
    out = await MathEquivalence().verify(job("so the answer is \\boxed{0.5}", reference="\\frac{1}{2}"))
    (v,) = out.verdicts
    assert v.passed and v.score == 1.0 and v.extracted_answer == "0.5"


async def test_wrong_and_missing_answers_fail() -> None:
    out = await MathEquivalence().verify(job("The answer is 3.", "I am not sure.", "#### 4", reference="4"))
    wrong, missing, right = out.verdicts
    assert not wrong.passed and wrong.score == 0.0 and wrong.extracted_answer == "3"
    assert not missing.passed and "no final answer" in missing.feedback
    assert right.passed


async def test_boxed_reference_is_unwrapped() -> None:
    out = await MathEquivalence().verify(job("answer: 12", reference="\\boxed{12}"))
    assert out.verdicts[0].passed


def test_missing_reference_is_rejected_on_the_reference_field() -> None:
    with pytest.raises(InvalidArgument) as err:
        MathEquivalence().validate(job("1", reference="  "))
    assert err.value.field == "reference"


async def test_format_without_pattern_checks_for_a_boxed_answer() -> None:
    out = await FormatCheck(500).verify(job("x \\boxed{\\frac{1}{2}} y", "no box here"))
    boxed, plain = out.verdicts
    assert boxed.passed and boxed.extracted_answer == "\\frac{1}{2}"
    assert not plain.passed and plain.score == 0.0


async def test_format_pattern_with_a_group_extracts_it() -> None:
    out = await FormatCheck(500).verify(job("Final Answer: 42", "42", format_pattern=r"Final Answer: (\d+)"))
    hit, miss = out.verdicts
    assert hit.passed and hit.extracted_answer == "42"
    assert not miss.passed


@pytest.mark.parametrize("pattern", ["(unclosed", "x" * 501])
def test_bad_format_patterns_are_rejected(pattern: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        FormatCheck(500).validate(job("a", format_pattern=pattern))
    assert err.value.field == "format_pattern"
