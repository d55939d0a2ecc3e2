"""The answer-form prompt set's judge (tests/helpers/answer_form_judge.py) accepts a value only
when it is the expected one, and a form only when the content is exactly the expected content.

Seen in the first run: for "Differentiate x^3 + 2x" it took the reply "2" for the value
"3*x**2 + 2" (math-verify read the expected string's last number), so a wrong value counted as
right and its reply as a form failure. Its symbolic step also took a word for a product of
letters ("algorithm" for "mhtirogla") and "3+i" for "3-i".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.answer_form_judge import complex_value, expression, factors, judge, same_value

PROMPTS: list[dict[str, Any]] = json.loads((Path(__file__).parents[2] / "data/answer_forms/prompts.json").read_text())[
    "prompts"
]
ENTRIES = {entry["id"]: entry for entry in PROMPTS}


@pytest.mark.parametrize(
    ("reading", "expected", "same"),
    [
        ("2", "3x^2 + 2", False),  # a bare number is never a polynomial
        ("3x^2", "3x^2 + 2", False),
        ("3*x**2 + 2", "3x^2 + 2", True),  # either notation
        ("2 + 3x^2", "3x^2 + 2", True),
        ("x**2 + 2*x - 15", "x^2 - 2x - 15", False),
        ("(x - 3)*(x - 2)", "(x - 3)(x - 2)", True),
        ("x^2 - 5x + 6", "(x - 3)(x - 2)", True),  # equal, though not factored: the form judges that
        ("a^2 + 2ab + b^2", "a**2 + 2*a*b + b**2", True),
        ("The answer is 2.", "3x^2 + 2", False),
        ("Tuesday", "x + 3", False),
        ("x*cos(x) + sin(x)", "x*cos(x) + sin(x)", True),
        ("__import__('os')", "x + 3", False),  # never evaluated
    ],
)
def test_an_expression_is_compared_by_sympy(reading: str, expected: str, same: bool) -> None:
    assert same_value(reading, expected, None, "expression") is same


def test_only_expressions_are_parsed() -> None:
    assert expression("3x^2 + 2") is not None and expression("x**2 - 1") is not None
    for text in ("Python", "x; import os", "2 hours", ""):
        assert expression(text) is None


@pytest.mark.parametrize(
    ("reading", "expected", "same"),
    [
        ("945", "3^3 * 5 * 7", False),  # the number factorized is not its factorization
        ("1001", "7 * 11 * 13", False),
        ("[3, 3, 3, 5, 7]", "3^3 * 5 * 7", True),
        ("{3: 3, 5: 1, 7: 1}", "3^3 * 5 * 7", True),
        ("3 \u00d7 3 \u00d7 3 \u00d7 5 \u00d7 7", "3^3 * 5 * 7", True),
        ("3**3*5*7", "3^3 * 5 * 7", True),
        ("2, 2, 3, 7", "[2, 2, 3, 7]", True),
        ("[2, 3, 7]", "[2, 2, 3, 7]", False),
        ("[2, 2, 3, 7, 1]", "[2, 2, 3, 7]", False),
    ],
)
def test_a_factorization_is_compared_by_its_factors(reading: str, expected: str, same: bool) -> None:
    assert same_value(reading, expected, None, "factorization") is same
    assert factors("Paris") is None


@pytest.mark.parametrize(
    ("reading", "expected", "same"),
    [
        ("3+i", "3-i", False),
        ("10-6i", "-8-6i", False),
        ("(-8-6j)", "-8-6i", True),
        ("-8 - 6*I", "-8-6i", True),
        ("1j", "i", True),
        ("-1+2i", "i", False),
        ("2", "i", False),
    ],
)
def test_a_complex_number_is_compared_by_its_value(reading: str, expected: str, same: bool) -> None:
    assert same_value(reading, expected, None, "complex") is same
    assert complex_value("Paris") is None


@pytest.mark.parametrize(
    ("reading", "expected", "kind", "same"),
    [
        ("algorithm", "mhtirogla", "string", False),  # a word is no product of letters
        ("lk", "kl", "string", False),
        ("the rain in spain", "The Rain In Spain", "string", False),  # the case is the value here
        ("Hll Wrld", "Hll Wrld", "string", True),
        ("algorithm", "mhtirogla", "word", False),
        ("FRIDAY", "Friday", "date", True),  # a weekday's case is form
        ("25", "25%", "percentage", True),  # the value right, the % a form failure
        ("0.25", "25%", "percentage", False),
        ("0.375", "3/8", "fraction", True),
        ("1000", "3/8", "fraction", False),
        ("{5, 4}", "{4, 5}", "set", True),
        ("{4}", "{4, 5}", "set", False),
        ("[3, 7, 19, 42, 28]", "[3, 7, 19, 28, 42]", "list", False),
        ("12; 24", "[12, 24]", "list", True),
        ("22:52", "22:25", "time", False),
        ("N", "Yes", "yes_no", False),
        ("True", "Yes", "yes_no", True),
    ],
)
def test_other_kinds_compare_their_values_only(reading: str, expected: str, kind: str, same: bool) -> None:
    assert same_value(reading, expected, None, kind) is same


def test_the_run_false_positive_is_a_wrong_value_now() -> None:
    entry = ENTRIES["expr-diff"]
    reasoning = "So, the derivative of \\( x^3 + 2x \\) with respect to \\( x \\) is \\( 3x^2 \\)."
    assert judge(entry, "The answer is 2.", reasoning) == (False, False)
    assert judge(entry, "The answer is 3x^2 + 2.", reasoning) == (True, True)
    assert judge(entry, "The answer is 3*x**2 + 2.", reasoning) == (True, False)  # right, not as asked


@pytest.mark.parametrize("entry", PROMPTS, ids=[entry["id"] for entry in PROMPTS])
def test_a_form_is_exact_only_when_the_content_is_exactly_the_expected_content(entry: dict[str, Any]) -> None:
    expected = entry["expected_content"]
    assert judge(entry, expected, "") == (True, True)
    for variant in {expected + ".", f"**{expected}**", expected.upper(), expected.lower(), f" {expected}x"}:
        if variant != expected:
            assert judge(entry, variant, "")[1] is False
