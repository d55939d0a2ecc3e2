"""Answer-form instructions that show an example answer: cut whole from what a program sees,
and the example kept to render the value in its shape.

The first two prompts are reasoning-gym's (a 0.5B model sorted the example's numbers and printed
the angel/devil template literally); the rest are phrasings of the same kinds of instruction.
"""

from __future__ import annotations

import pytest

from services.common.answer_examples import requote
from services.common.answer_form import AnswerForm, parse_form, render, render_value, strip_form

SORT = (
    "Sort these numbers in ascending order: 35.0, -66.0, -23.0\n"
    "Please follow the instruction below:\n"
    "## 1. Let all your answers be a list of numbers. Instead of reporting your answer as -69, -13, 1, 7, 11, 43,"
    " 59, 61, use ['-69', '-13', '1', '7', '11', '43', '59', '61'] instead\n"
    "## 2. Convert all numbers in the square brackets as strings. For example, ['-69', '-13', '1', '7', '11', '43',"
    " '59', '61']\n"
)
ISLAND = (
    "A very special island is inhabited only by angels and devils. Angels always tell the truth, and devils always"
    ' lie. You meet 2 inhabitants: Emma, and Jackson. Emma said, "Jackson is an angel if and only if Emma is an'
    ' angel." Jackson remarked, "Emma is an angel". So who is an angel and who is a devil?'
)
ISLAND_FORM = ' (Format your answer like: "Emma is a angel/devil, and Jackson is a angel/devil")'

STRIPPED = [
    (
        SORT,
        "Sort these numbers in ascending order: 35.0, -66.0, -23.0",
        "['-69', '-13', '1', '7', '11', '43', '59', '61']",
    ),
    (ISLAND + ISLAND_FORM, ISLAND, "Emma is a angel/devil, and Jackson is a angel/devil"),
    (
        "What are the first 4 primes?\nAnswer format:\n- a list of integers, e.g. [1, 2, 3]\n- no extra text",
        "What are the first 4 primes?",
        "[1, 2, 3]",
    ),
    (
        "List the vowels in 'education'. Your answer should look like: ['x', 'y']",
        "List the vowels in 'education'.",
        "['x', 'y']",
    ),
    (
        "Sort 3, 1, 2 in descending order.\n\nOutput format:\n1. Comma-separated numbers\n"
        "2. For example: 9, 8, 7\n\nThanks!",
        "Sort 3, 1, 2 in descending order.\n\nThanks!",
        "9, 8, 7",
    ),
    (
        "Reverse the list [4, 5, 6]. Give your answer as a Python list, e.g. [9, 8, 7].",
        "Reverse the list [4, 5, 6].",
        "[9, 8, 7]",
    ),
    (
        "Compute the time 3 hours after 22:15. Answer in the format: HH:MM",
        "Compute the time 3 hours after 22:15.",
        "HH:MM",
    ),
    (
        "Sort 9, 4, 7 (format your answer like: [1, 2, 3]) and explain nothing.",
        "Sort 9, 4, 7 and explain nothing.",
        "[1, 2, 3]",
    ),
    (
        "Rearrange 'tac' into a word. Instead of writing the answer as cat, write 'CAT' instead.",
        "Rearrange 'tac' into a word.",
        "CAT",
    ),
    (
        "Solve the puzzle.\nFormatting rules:\n* Write each answer on its own line\n* Use quotes around strings\n\n"
        "The puzzle: what is 2+2?",
        "Solve the puzzle.\n\nThe puzzle: what is 2+2?",
        None,
    ),
    (
        "Which numbers are even: 1, 2, 3, 4? Please answer in the following format: [even numbers]",
        "Which numbers are even: 1, 2, 3, 4?",
        "[even numbers]",
    ),
]


@pytest.mark.parametrize(("question", "stripped", "example"), STRIPPED)
def test_instructions_with_examples_are_cut_whole_and_the_example_kept(
    question: str, stripped: str, example: str | None
) -> None:
    form = parse_form(question)
    assert strip_form(question) == stripped
    assert form.example == example and form.asked == (example is not None)  # rules alone show no shape


@pytest.mark.parametrize(
    "question",
    [
        "Spell this word backward (example: sun -> nus): lea",
        "Respond with the weekday (Monday-Sunday).",
        "Please follow the instructions below:\n1. Take the number 12.\n2. Multiply it by 3.\nWhat do you get?",
        "Count the letters in 'banana', for example the letter a appears often.",
        "Format your answer as a comma-separated list: sort 5, 2, 9.",
        "Translate into French, e.g. 'cat' becomes 'chat': dog",
    ],
)
def test_examples_that_define_the_task_stay(question: str) -> None:
    assert strip_form(question) == question
    assert parse_form(question).example is None


def test_a_template_wins_over_an_example() -> None:
    form = parse_form("Multiply 13 by 17 and write your answer as 'Result = ?'")
    assert form.example is None and render("221", form) == "Result = 221"


def test_with_an_example_the_value_is_written_bare_in_its_shape() -> None:
    assert render("[-66.0, -23.0, 35.0]", parse_form(SORT)) == "['-66.0', '-23.0', '35.0']"
    island = parse_form(ISLAND + ISLAND_FORM)
    assert render("Emma is a devil, and Jackson is a devil", island) == "Emma is a devil, and Jackson is a devil"
    assert render_value("(1, 2)", AnswerForm(example='["a", "b"]')) == '["1", "2"]'
    assert render("[2, 3, 5, 7]", parse_form("What are the first 4 primes? Your answer should look like: [1, 2]")) == (
        "[2, 3, 5, 7]"
    )


@pytest.mark.parametrize(
    ("value", "example"),
    [
        ("[1, 2]", "[1, 2]"),  # the example's items are not strings
        ("42", "['1', '2']"),  # the value is not a list
        ("[[1], [2]]", "['1', '2']"),  # nested
        ("[1, 2", "['1', '2']"),  # not a literal
        ("['it's']", "['a']"),
        ("__import__('os')", "['a']"),
    ],
)
def test_values_not_in_a_quoted_list_shape_are_left_as_they_are(value: str, example: str) -> None:
    assert requote(value, example) == value
