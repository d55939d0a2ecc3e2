"""Answer forms read out of questions, stripped from what a program is asked, and rendered.

Phrasings vary the way users write them: verbs (reply, respond, answer, give, output, tell),
"only"/"just" before or after, a template in any quotes or none, a placeholder of any kind.
"""

from __future__ import annotations

import pytest

from services.common.answer_form import SLOT, AnswerForm, parse_form, render, strip_form

BARE = [
    ("What is 6 times 7? Reply with the number.", "What is 6 times 7?"),
    ("What's 15% of 240? Only reply with the final value.", "What's 15% of 240?"),
    ("How many r's are in strawberry? Just the number please.", "How many r's are in strawberry?"),
    ("12 * 12 = ? answer only", "12 * 12 = ?"),
    ("What is 2^10? Give me only the number, no explanation.", "What is 2^10?"),
    ("How much is 3 dozen? Respond with just a number and nothing else.", "How much is 3 dozen?"),
    ("Tell me 100 divided by 8, don't explain", "Tell me 100 divided by 8"),
    ("Add 3 and 4. number only", "Add 3 and 4."),
    ("Is 91 prime? Reply with yes or no.", "Is 91 prime?"),
    ("What is 48 / 6? Answer with a single integer.", "What is 48 / 6?"),
    ("Compute 17 squared. Output only the result.", "Compute 17 squared."),
    ("sqrt(144)? no working needed", "sqrt(144)?"),
    (
        "How many legs do 3 spiders have? Please respond with the numeric value only.",
        "How many legs do 3 spiders have?",
    ),
    ("Quick: 999 + 1. Return just the digits.", "Quick: 999 + 1."),
    ("What is 7 x 8, just give the answer", "What is 7 x 8"),
    ("Without any explanation, what is 81 / 9?", "what is 81 / 9?"),
    # values that are not numbers: a list, a weekday, a string
    ("Sort 5, 3, 9, 1 ascending. Reply with just the list.", "Sort 5, 3, 9, 1 ascending."),
    (
        "If today is Monday, what day is it in 3 days? Reply with just the weekday name.",
        "If today is Monday, what day is it in 3 days?",
    ),
    ("Convert 10 to binary. Give only the binary string.", "Convert 10 to binary."),
]
TEMPLATES = [
    ("Compute 123 + 456. End with 'Answer: …'", "Answer: " + SLOT, "Compute 123 + 456."),
    ('What is 45 minus 17? Finish your reply with "Final answer: X".', "Final answer: " + SLOT, "What is 45 minus 17?"),
    ("Multiply 13 by 17 and write your answer as 'Result = ?'", "Result = " + SLOT, "Multiply 13 by 17"),
    ("Sum of 4 and 5. Format: Answer: <n>", "Answer: " + SLOT, "Sum of 4 and 5."),
    ("Calculate 9 squared and put the final answer in \\boxed{}.", "\\boxed{" + SLOT + "}", "Calculate 9 squared."),
    ("What is 3 + 3? Conclude with `ANSWER=[number]`", "ANSWER=" + SLOT, "What is 3 + 3?"),
    ("Half of 90? Start your reply with 'Answer:'", "Answer: " + SLOT, "Half of 90?"),
    ("How many days in 4 weeks? Use the format “Total: ___”.", "Total: " + SLOT, "How many days in 4 weeks?"),
]


@pytest.mark.parametrize(("question", "stripped"), BARE)
def test_bare_value_requests_are_found_and_stripped(question: str, stripped: str) -> None:
    form = parse_form(question)
    assert form.bare and form.template is None, form
    assert strip_form(question) == stripped
    assert render("42", form) == "42"


@pytest.mark.parametrize(("question", "template", "stripped"), TEMPLATES)
def test_templates_are_found_stripped_and_filled(question: str, template: str, stripped: str) -> None:
    form = parse_form(question)
    assert form.template == template
    assert strip_form(question) == stripped
    assert render("42", form) == template.replace(SLOT, "42")


@pytest.mark.parametrize(
    "question",
    [
        "What is 6 times 7?",
        "Give the number of ways to arrange 4 books.",
        "Print the number of vowels in 'banana'.",
        "Return the word with the most letters: cat, horse, ox.",
        "Write 10 in binary.",
        "Convert 'hello' to uppercase.",
        "Give the value of 'x' if 2x+3=7.",
        "Express your answer in simplest form: 6/8",
        "Only 3 of the 12 eggs broke. How many are left?",
        "Just the other day I bought 5 apples and 7 pears. How many fruits is that?",
    ],
)
def test_questions_without_a_form_are_left_whole(question: str) -> None:
    form = parse_form(question)
    assert not form.bare and form.template is None and form.case is None
    assert strip_form(question) == question
    assert render("42", form) == "The answer is 42."


def test_units_stay_in_the_question_and_are_written_after_the_number() -> None:
    question = "A rope is 2 m long. How long is it? Answer in centimeters."
    form = parse_form(question)
    assert form.unit == "centimeters" and strip_form(question) == question  # the unit changes the number
    assert render("200", form) == "The answer is 200 centimeters."
    assert render("200 cm", form) == "The answer is 200 centimeters."
    bare = parse_form("How many seconds in 2 minutes? Answer in seconds, number only.")
    assert render("120 seconds", bare) == "120"  # "number only" wins
    assert parse_form("What share is 3 of 4? Give the answer in percent.").unit == "%"
    assert render("75", parse_form("What share is 3 of 4? Give the answer in percent.")) == "The answer is 75%."


def test_letter_case_is_applied_and_stripped() -> None:
    form = parse_form("Reverse the word 'hello'. Reply in uppercase.")
    assert form.case == "upper" and strip_form("Reverse the word 'hello'. Reply in uppercase.") == (
        "Reverse the word 'hello'."
    )
    assert render("olleh", form) == "The answer is OLLEH."
    form = parse_form("What day of the week is 2024-03-15? Answer in one word, lowercase.")
    assert (form.case, form.bare) == ("lower", True)
    assert render("Friday", form) == "friday"
    assert parse_form("What is 3 + 4? Answer in all caps.").unit is None


def test_numbers_are_cleaned_rounded_and_written_as_asked() -> None:
    plain = AnswerForm(bare=True)
    assert render("24.0", plain) == "24"
    assert render("0.30000000000000004", plain) == "0.3"
    assert render("1,000", plain) == "1000"
    assert render("-1.5860000000000012", plain) == "-1.586"
    rounded = parse_form("What is 7/8 as a decimal? Round to 2 decimal places.")
    assert rounded.decimals == 2 and render("0.875", rounded) == "The answer is 0.88."
    assert "Round to 2 decimal places" in strip_form("What is 7/8 as a decimal? Round to 2 decimal places.")
    fraction = parse_form("What is 1/2 + 1/3? Give the answer as a fraction.")
    assert fraction.fraction and render("0.8333333333333334", fraction) == "The answer is 5/6."
    assert strip_form("What is 1/2 + 1/3? Give the answer as a fraction.") == "What is 1/2 + 1/3?"
    integer = parse_form("What is 10 / 4 as a whole number? Reply with the number.")
    assert render("2.5", integer) == "2"
    assert render("Paris", plain) == "Paris"  # not a number: as it is


def test_a_printed_python_list_is_written_as_a_person_lists_unless_an_example_shows_another_shape() -> None:
    question = "Sort these words alphabetically: pear, apple, mango, banana"
    listed = render("['apple', 'banana', 'mango', 'pear']", parse_form(question))
    assert listed == "The answer is apple, banana, mango, pear."
    assert render("(1, 3, 5.5)", AnswerForm(bare=True)) == "1, 3, 5.5"
    shaped = parse_form('Sort 3.0, -1.0 ascending. Format your answer like: ["-1.0", "3.0"]')
    assert render("['-1.0', '3.0']", shaped) == '["-1.0", "3.0"]'  # the example's shape wins
    for kept in ("[[1, 2], [3]]", "[True, False]", "[]", "[1, 2", "[x for x in y]"):
        assert render(kept, AnswerForm(bare=True)) == kept


def test_asked_says_whether_any_form_was_requested() -> None:
    assert not parse_form("What is 6 times 7?").asked
    assert parse_form("What is 6 times 7? Reply with the number.").asked
    assert parse_form("Round 3.14159 to 2 decimal places.").asked
