"""The program checks on the packaged model's real completions (tests/unit/data/program_outputs.json,
captured by scripts/capture_program_outputs.py, labelled by hand): literal-printing programs
abstain, computing programs vote, and the stripped prompt stops the model copying the form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.search.strategies.program import program_source
from services.search.strategies.program_checks import (
    computes_nothing,
    foreign_data,
    guessed_output,
    prints_literal,
    program_vote,
    reads_the_moment,
)

DATA = json.loads((Path(__file__).parents[1] / "data" / "program_outputs.json").read_text())
RECORDS: list[dict[str, Any]] = DATA["records"]


def runnable(label: str) -> list[dict[str, Any]]:
    return [r for r in RECORDS if r["label"] == label]


@pytest.mark.parametrize("record", runnable("literal"), ids=lambda r: r["text"][:40])
def test_real_literal_printing_programs_abstain(record: dict[str, Any]) -> None:
    program = program_source(record["text"])
    assert program is not None and prints_literal(program)
    assert computes_nothing(program, "32", record["question"]) == "prints a literal"


@pytest.mark.parametrize("record", runnable("computes"), ids=lambda r: r["text"][:40])
def test_real_computing_programs_vote(record: dict[str, Any]) -> None:
    program = program_source(record["text"])
    assert program is not None and not prints_literal(program)
    assert computes_nothing(program, "42", record["question"]) is None


def test_the_capture_holds_both_kinds_from_both_prompts() -> None:
    assert len(runnable("literal")) >= 20 and len(runnable("computes")) >= 10
    assert {r["prompt"] for r in runnable("computes")} == {"old", "new"}
    # The reply that made the literal check necessary: "What is 6 times 7? Reply with the number." written as print(32).
    greedy = next(r for r in RECORDS if r["prompt"] == "old" and r["seed"] == 0 and "6 times 7" in r["question"])
    assert program_source(greedy["text"]) == "print(32)" and greedy["label"] == "literal"


def test_a_form_instruction_in_the_prompt_is_copied_into_the_program_and_a_stripped_one_never() -> None:
    template = [r for r in RECORDS if "'Answer: …'" in r["question"]]
    assert any("Answer: 579" in r["text"] for r in template if r["prompt"] == "old")
    assert not any("Answer" in r["text"] for r in RECORDS if r["prompt"] == "new")


def test_the_run_check_catches_a_constant_returned_from_a_function() -> None:
    program = "def solve():\n    return 32\n\nprint(solve())"
    assert not prints_literal(program)  # the AST alone cannot see it
    assert guessed_output(program, "32", "What is 6 times 7?")
    assert computes_nothing(program, "32", "What is 6 times 7?") is not None
    assert not guessed_output("def f():\n    return 6 * 7\n\nprint(f())", "42", "What is 6 times 7?")
    assert not guessed_output("days = {'Mon': 0, 'Wed': 2}\nprint(days['Wed'])", "2", "Day index of Wed?")


@pytest.mark.parametrize(
    ("program", "literal"),
    [
        ("x = 42\nprint(x)", True),
        ('print("Answer: 10")', True),
        ('answer = 7\nprint(f"Answer: {answer}")', True),
        ("a = 3\nb = a\nprint(b)", True),
        ("print(-5)", True),
        ("x = 6\ny = 7\nprint(x * y)", False),
        ("total = 0\nfor i in range(4):\n    total += i\nprint(total)", False),
        ("print(len('strawberry'))", False),
        ("x = 1\nx += 1\nprint(x)", False),
        ("print()", False),
    ],
)
def test_literal_printing_by_the_ast(program: str, literal: bool) -> None:
    assert prints_literal(program) is literal


# Real programs of the packaged 0.5B model (docs/data/calibration/pools/qwen2.5-coder-0.5b,
# number_sorting), shown the question with its example-carrying form instructions.
SORT_QUESTION = "Sort these numbers in ascending order: -8.0, 41.0, -13.0"
SORT_ASKED = (
    f"{SORT_QUESTION}\nPlease follow the instruction below:\n## 1. Let all your answers be a list of numbers. "
    "Instead of reporting your answer as -69, -13, 1, 7, 11, 43, 59, 61, use ['-69', '-13', '1', '7', '11', '43', "
    "'59', '61'] instead\n## 2. Convert all numbers in the square brackets as strings. For example, ['-69', '-13', "
    "'1', '7', '11', '43', '59', '61']\n"
)
COPIED_EXAMPLE = [
    "numbers = ['-69', '-13', '1', '7', '11', '43', '59', '61']\nnumbers.sort()\nprint(numbers)",
    "# Step 1: Convert all numbers in the square brackets to strings\n"
    "numbers = ['-69', '-13', '1', '7', '11', '43', '59', '61']\n\n# Step 2: Sort the numbers\n"
    "sorted_numbers = sorted(numbers)\n\n# Print the sorted numbers\nprint(sorted_numbers)",
    "numbers = [-69, -13, 1, 7, 11, 43, 59, 61]\nnumbers.sort()\nprint(numbers)",
]


@pytest.mark.parametrize("program", COPIED_EXAMPLE)
def test_a_program_computing_on_an_examples_numbers_abstains(program: str) -> None:
    printed = "[-69, -13, 1, 7, 11, 43, 59, 61]"
    assert computes_nothing(program, printed, SORT_ASKED, shown=SORT_QUESTION) is not None


@pytest.mark.parametrize(
    "program",
    [
        "numbers = [-8.0, 41.0, -13.0]\nnumbers.sort()\nprint(numbers)",  # sorts in place: computed
        "numbers = ['-8.0', '41.0', '-13.0']\nprint(sorted(numbers, key=float))",
        "data = [-8.0, 41.0, -13.0]\nweights = [1, 2, 3]\nprint(sorted(data))",
    ],
)
def test_a_program_on_the_questions_own_numbers_votes(program: str) -> None:
    assert computes_nothing(program, "[-13.0, -8.0, 41.0]", SORT_ASKED, shown=SORT_QUESTION) is None
    assert computes_nothing(program, "[-13.0, -8.0, 41.0]", SORT_QUESTION) is None


def test_a_list_unrelated_to_the_questions_list_is_foreign_data() -> None:
    program = "values = [3, 9, 27, 81]\nprint(sorted(values))"
    assert foreign_data(program, "Sort these numbers: 5, 2, 8, 1")
    assert not foreign_data("values = [3, 9, 27, 81]\nprint(sorted(values + [5, 2, 8, 1]))", "Sort: 5, 2, 8, 1")


def test_a_lookup_table_is_not_foreign_data() -> None:
    program = "days = [31, 28, 31, 30, 31]\nprint(sum(days[:2]) + 15)"
    assert not foreign_data(program, "What day of the year is March 15, 2021, 3 days later?")
    assert not foreign_data(program, "Add 15 to the days of January and February.")


def test_program_vote_keys_what_votes_and_says_why_a_guess_abstains() -> None:
    assert program_vote("print(6 * 7)", "42", "What is 6 times 7? Reply with the number.", None) == ("42", None)
    assert program_vote("print(32)", "32", "What is 6 times 7? Reply with the number.", None) == (
        "",
        "prints a literal",
    )
    assert program_vote(COPIED_EXAMPLE[2], "[-69, -13]", "Sort these numbers: 5, 2, 8, 4", None)[0] == ""
    assert program_vote("print(1)", None, "q", None) == ("", None)


# Real programs of the packaged model: one from the calibration pools (calendar_arithmetic; 15
# pooled programs read the clock, 13 of them wrong), one from a gateway reply at effort `low`.
CLOCK_PROGRAMS = [
    (
        "If today is Sunday, April 24, 2022, what day of the week was it 91 days ago? "
        "Reply with just the weekday name.",
        "import datetime\n\nnow = datetime.date.today()\ndays_ago = now - datetime.timedelta(days=91)\n"
        "print(days_ago.strftime('%A'))",
    ),
    (
        "If today is Wednesday, what day of the week will it be in 12 days?",
        "from datetime import datetime, timedelta\n\ntoday = datetime.today()\ndays_to_add = 12\n"
        "new_day = today + timedelta(days_to_add)\nprint(new_day.strftime('%A'))",
    ),
]


@pytest.mark.parametrize(("question", "program"), CLOCK_PROGRAMS)
def test_a_program_reading_the_clock_abstains_where_the_question_states_its_day(question: str, program: str) -> None:
    assert reads_the_moment(program, question) == "reads the clock, not the day or time the question states"
    assert program_vote(program, "Thursday", question, None) == ("", reads_the_moment(program, question))


def test_the_clock_is_the_answer_where_the_question_states_no_day() -> None:
    program = "from datetime import date\nprint((date(date.today().year, 12, 25) - date.today()).days)"
    assert reads_the_moment(program, "How many days until Christmas?") is None
    assert reads_the_moment("import time\nprint(time.time() // 86400)", "How many days since 1970 is it now?") is None
    assert reads_the_moment("import time\nprint(time.time())", "If it is 10:45 now, what time is it in 50 minutes?")


def test_random_draws_abstain_unless_the_question_asks_for_sampling() -> None:
    program = "import random\nprint(random.randint(1, 6) + 3)"
    assert reads_the_moment(program, "What is 3 plus 4?") == "draws random numbers the question does not ask for"
    assert reads_the_moment("import numpy as np\nprint(np.random.rand())", "What is 1/2?")
    assert reads_the_moment(program, "Simulate a die roll plus 3.") is None
    assert reads_the_moment("print(sum(range(10)))", "What is 0+1+...+9?") is None
    assert reads_the_moment("print(", "What is 1+1?") is None  # does not parse: the run decides


def test_true_or_false_answers_only_a_yes_or_no_question() -> None:
    """The packaged model, at effort `medium` through the gateway, answered "Which is larger,
    9.11 or 9.9?" with ``print(9.11 > 9.9)``: False is no option of the question."""
    which = "Which is larger, 9.11 or 9.9?"
    assert program_vote("print(9.11 > 9.9)", "False", which, None) == (
        "",
        "prints True or False to a question that is not yes or no",
    )
    assert program_vote("print(221 % 13 != 0)", "False", "Is 221 a prime number?", None) == ("false", None)
    assert program_vote("print(2020 % 4 == 0)", "True", "Tell me whether 2020 is a leap year.", None)[0] == "true"
