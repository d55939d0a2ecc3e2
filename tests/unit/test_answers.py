"""Answer extraction, normalization and equivalence (services.common.answers)."""

from __future__ import annotations

import threading

import pytest

from services.common.answers import (
    answers_equivalent,
    extract_answer,
    extract_boxed,
    extract_code,
    is_correct,
    normalize_answer,
    normalize_for_vote,
    program_answer,
    requested_decimals,
    vote_key,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("\\boxed{\\frac{\\sqrt{3}}{2}} and more", "\\frac{\\sqrt{3}}{2}"),
        ("first \\boxed{1} then \\boxed{2}", "2"),
        ("\\fbox{7}", "7"),
        ("\\boxed 5.", "5"),
        ("\\boxed{unclosed", None),
        ("nothing here", None),
    ],
)
def test_extract_boxed(text: str, expected: str | None) -> None:
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Thinking... The answer is 42.", "42"),
        ("The final answer is: $3/4$.", "3/4"),
        ("steps\n#### 1,234\n", "1,234"),
        ("Final Answer: \\boxed{x+1}", "x+1"),
        ("I computed 3 + 4 = 7 and then 7 * 2 = 14", "14"),
        ("answer is 5 but \\boxed{6}", "6"),
        ("get the final answer: \\(18\\).\n\nTherefore", "18"),
        ("no digits at all", None),
        ("", None),
    ],
)
def test_extract_answer(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("1,234", "1234"),
        ("$5.00", "5"),
        ("5 dollars", "5"),
        ("12 cm", "12"),
        ("50%", "50"),
        ("\\text{7}", "7"),
        ("\\dfrac{2}{4}", "1/2"),
        ("2/4", "1/2"),
        ("0.50", "1/2"),
        (" X + 1 ", "x+1"),
        ("\\left( 1, 2 \\right)", "(1,2)"),
        ("\\(18\\)", "18"),
    ],
)
def test_normalize_answer(raw: str, expected: str) -> None:
    assert normalize_answer(raw) == expected


def test_normalize_for_vote_merges_spellings() -> None:
    spellings = ["The answer is 1,000.", "#### 1000", "\\boxed{1000.0}", "so it costs $1000"]
    assert {normalize_for_vote(s) for s in spellings} == {"1000"}
    assert normalize_for_vote("no answer") == ""


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("1/2", "0.5", True),
        ("\\frac12", "0.5", True),
        ("\\frac{1}{2}", "1/2", True),
        ("2", "3", False),
        ("x+1", "1+x", True),
        ("\\sqrt{4}", "2", True),
        ("", "2", False),
        ("7", "", False),
    ],
)
def test_answers_equivalent(a: str, b: str, equal: bool) -> None:
    assert answers_equivalent(a, b) is equal


def test_equivalence_works_off_the_main_thread() -> None:
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(answers_equivalent("x+1", "1+x")))
    thread.start()
    thread.join()
    assert results == [True]


def test_is_correct() -> None:
    assert is_correct("Let me see. 3*4=12. The answer is 12.", "12")
    assert not is_correct("The answer is 13.", "12")
    assert not is_correct("I do not know", "12")


def test_extract_code_prefers_python_and_last_block() -> None:
    text = "```bash\nls\n```\n```python\ndef f():\n    return 1\n```\n```python\ndef g():\n    return 2\n```"
    assert extract_code(text) == "def g():\n    return 2"
    assert extract_code("no code") is None
    assert extract_code("```sh\necho\n```", language="python") == "echo"


# --- vote keys that cope with what programs print ----------------------------------------------


@pytest.mark.parametrize(
    ("printed", "clean"),
    [
        ("-1.5860000000000012", "-1.586"),  # float noise from a real program
        ("0.30000000000000004", "3/10"),
        ("34.0", "34"),
        ("0.3333333333333333", "\\frac{1}{3}"),
        ("1,000", "1000"),
        ("2.5000", "5/2"),
    ],
)
def test_vote_keys_tolerate_float_noise(printed: str, clean: str) -> None:
    assert vote_key(printed) == vote_key(clean)


def test_vote_keys_keep_distinct_answers_apart() -> None:
    assert vote_key("1.586") != vote_key("1.587")
    assert vote_key("12345678901234567") != vote_key("12345678901234568")  # integers stay exact
    assert vote_key("x+1") == "x+1"


@pytest.mark.parametrize(
    ("question", "decimals"),
    [
        ("What is 22/7? Round your answer to 2 decimal places.", 2),
        ("Give the result rounded to three decimal places.", 3),
        ("Express the answer to the nearest hundredth.", 2),
        ("How many buses are needed, to the nearest whole number?", 0),
        ("What is 17 + 25?", None),
    ],
)
def test_requested_decimals(question: str, decimals: int | None) -> None:
    assert requested_decimals(question) == decimals


def test_vote_key_rounds_to_the_requested_decimals() -> None:
    assert vote_key("3.14159", decimals=2) == vote_key("3.1402", decimals=2) == "3.14"
    assert vote_key("7", decimals=2) == "7"


@pytest.mark.parametrize(
    ("stdout", "answer"),
    [
        ("42\n", "42"),
        ("step 1\nstep 2\n17.5\n", "17.5"),
        ("Answer: 42\n", "42"),
        ("The answer is 1,234.\n", "1,234"),
        ("total = 12\n", "12"),
        ("[1, 2, 3]\n", "[1, 2, 3]"),
        ("\n\n", None),
    ],
)
def test_program_answer_reads_the_last_printed_value(stdout: str, answer: str | None) -> None:
    assert program_answer(stdout) == answer


def test_numbers_too_large_for_a_float_compare_exactly() -> None:
    """A pool drawer died on a model's answer of a few hundred digits (float overflow)."""
    huge = "7" * 400
    assert answers_equivalent(huge, huge + ".0")
    assert not answers_equivalent(huge, "7" * 401)
    assert not answers_equivalent("1e999999999", "1")  # no number of a billion digits is built
