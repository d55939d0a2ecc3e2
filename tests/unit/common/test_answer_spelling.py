"""A decided value is written as its candidate spelled it, converted only as far as the form
asks: numbers (services.common.answer_numbers) and lists (services.common.answer_lists)."""

from __future__ import annotations

import pytest

from services.common.answer_form import parse_form, strip_form
from services.common.answer_lists import asked_separator, listed
from services.common.answer_numbers import number_text, ratio_spelling, shown_spelling
from services.common.answers import normalize_answer, vote_key

TIMES = "\u00d7"  # the multiplication sign


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("42", "42"),
        ("24.0", "24"),  # integers stay integers
        ("1,200", "1200"),
        ("137/260", "137/260"),  # a ratio stays a ratio
        ("-37/3", "-37/3"),
        ("6/3", "2"),
        ("0.30000000000000004", "0.3"),  # float noise goes
        ("-1.5860000000000012", "-1.586"),
        ("-12.333333333333334", "-12.333333333333334"),  # a long decimal is not noise: as printed
        ("0.5269230769230769", "0.5269230769230769"),
        ("3.14159", "3.14159"),
        ("0.00001", "0.00001"),
        ("Paris", None),
        ("14:05", None),
    ],
)
def test_a_number_keeps_its_spelling_unless_the_form_asks(value: str, text: str | None) -> None:
    assert number_text(value) == text


def test_a_fraction_or_rounding_is_applied_only_when_asked() -> None:
    assert number_text("0.5269230769230769", fraction=True) == "137/260"
    assert number_text("548/1040", fraction=True) == "137/260"
    assert number_text("548/1040") == "548/1040"  # as spelled: reducing it was not asked
    assert number_text("137/260", decimals=3) == "0.527"
    assert number_text("-37/3", decimals=0) == "-12"


def test_ratio_spellings() -> None:
    assert ratio_spelling(" 137 / 260 ") == "137/260"
    assert ratio_spelling("1/0") is None and ratio_spelling("0.5") is None and ratio_spelling("a/b") is None


def test_the_shown_spelling_is_the_asked_form_else_the_most_common_else_the_earliest() -> None:
    spellings = ["0.5269230769230769", "137/260", "0.5269230769230769"]
    assert shown_spelling(spellings, fraction=True) == 1
    assert shown_spelling(spellings) == 0
    assert shown_spelling(["137/260", "0.5269230769230769", "0.5269230769230769"]) == 1
    assert shown_spelling(["-1.586", "-1.5860000000000012"]) == 0
    assert shown_spelling(["0.5", "0.50"], fraction=True) == 0  # no spelling in the form: the majority rule
    assert shown_spelling([]) == 0


@pytest.mark.parametrize(
    ("question", "separator"),
    [
        (f"Find the prime factorization of 261. Format your answer like: 2 {TIMES} 2 {TIMES} 5", f" {TIMES} "),
        (f"Factor 261 into primes, in the form a {TIMES} b {TIMES} c.", f" {TIMES} "),
        ("Factor 60 (e.g. 2*3*5).", "*"),
        ("Factor 60, for example 2 x 2 x 15.", " x "),
        ("List the primes below 10, comma-separated.", ", "),
        ("List them separated by semicolons.", "; "),
        ("Give the words space-separated.", " "),
        ("Name the planets, one per line.", "\n"),
        ("Find the prime factorization of 84. Write the factors separated by \u00d7", f" {TIMES} "),
        ("Factor 84, the factors separated by *.", " * "),
        ("What is 25 * 4 * 3?", None),  # a product to compute shows no list form
        ("Can you work out 25 * 4 * 3 for me? Put the answer in \\boxed{}.", None),
        ("What is 6 times 7?", None),
    ],
)
def test_the_separator_asked_for(question: str, separator: str | None) -> None:
    assert parse_form(question).separator == separator


def test_an_example_shape_wins_over_a_named_separator() -> None:
    assert asked_separator("comma-separated, like [1, 2]", "[1, 2]") is None
    assert asked_separator("comma-separated", "2; 3") == "; "


def test_a_list_keeps_its_items_and_takes_the_asked_separator() -> None:
    assert listed("[3, 3, 29]") == "3, 3, 29"
    assert listed("[3, 3, 29]", f" {TIMES} ") == f"3 {TIMES} 3 {TIMES} 29"
    assert listed("3 * 3 * 29", f" {TIMES} ") == f"3 {TIMES} 3 {TIMES} 29"
    assert listed("3, 3, 29", f" {TIMES} ") == f"3 {TIMES} 3 {TIMES} 29"
    assert listed("['b', 'a']", "\n") == "b\na"
    for kept in ("Paris", "14:05", "(-12+3j)", "[[1], [2]]", "[True]", "Emma is a devil, and Jackson is a devil"):
        assert listed(kept, f" {TIMES} ") == kept
    assert listed("3 * 3 * 29") == "3 * 3 * 29"  # no separator asked: a written product stays


def test_simplified_fraction_questions_ask_a_bare_fraction() -> None:
    question = "Simplify the fraction 548/1040 to its lowest terms. Give only the simplified fraction"
    form = parse_form(question)
    assert form.fraction and form.bare
    assert strip_form(question, form) == "Simplify the fraction 548/1040 to its lowest terms."
    assert parse_form("Reduce 6/8 to lowest terms.").fraction
    assert not parse_form("Simplify the fraction 6/8.").fraction  # still written as printed: a ratio


def test_an_imaginary_number_is_not_a_number_with_a_unit() -> None:
    assert vote_key("3j") != vote_key("3")
    assert normalize_answer("2i") == "2i"
    assert vote_key("5 m") == vote_key("5")  # units still drop
