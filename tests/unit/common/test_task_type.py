"""The task-type classifier on varied, realistic prompts: the rules in services/common/task_type.py.

Prompts come in the shapes the data sets and users send: reasoning-gym arithmetic templates,
GSM-style stories, CHAMP competition problems, HumanEval function stubs, chat requests. Each
list is one task type; a prompt moved between lists documents a changed rule.
"""

from __future__ import annotations

import pytest

from services.common.task_type import (
    FEATURE_TASK_TYPES,
    TASK_TYPES,
    VALUE_TASKS,
    asks_quantity,
    asks_yes_or_no,
    classify_task,
    feature_task,
)

ARITHMETIC = [
    "What is 17 + 25?",
    "Calculate -5 * -6 - 7 + 3.",
    "State the final answer to the following arithmetic problem: 4 + 3 - 2 =",
    "Solve the following multiplication: 43 * 18. Give only the result as your final answer.",
    (
        "Please solve this problem to a maximum of 4 significant digits, rounding up from the half. Only reply with "
        "the final value.\n3.14 * 2.5 - 1.2 = ?"
    ),
    "Find the Greatest Common Divisor (GCD) of these numbers: 24, 36. Give only the GCD as your final answer.",
    "Find the Least Common Multiple (LCM) of these numbers: 12, 18",
    "Simplify the fraction 12/18 to its lowest terms. Give only the simplified fraction as your final answer.",
    (
        "Your task is to compute an exponentiation of a number.\n\nCompute 2.5^3. Return your final answer correct "
        "to 3 significant figures."
    ),
    "what's 15% of 80",
    "What is the square root of 144?",
    "How much is 7 times 8?",
    "Evaluate: (3 + 4) * (10 - 2) / 4.",
    "Compute 2**10 - 1",
    "Find the prime factorization of 84. Write the factors separated by \u00d7",
    "12 \u00d7 7 = ?",
    "What is 3 + 4? Explain your reasoning.",
    "Solve for x: 2x + 3 = 7",
    "What is 15 percent of 240?",
    "What's half of 86?",
    "Add 17 and 25.",
    "What is the square of 12?",
    "5! = ?",
]
MATH_WORD = [
    (
        "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many "
        "clips did Natalia sell altogether in April and May?"
    ),
    (
        "Your task is to count how many legs there are in total when given a list of animals.\n\nNow, how many legs "
        "are there in total if you have 3 ducks, 2 cats?\n"
    ),
    (
        "In Ms. Lee's class of 30 students, 20% of the class are in the band. Out of the remaining class, 25% of "
        "the students are in the choir. How many students are in neither?"
    ),
    "A train travels 120 km in 2 hours. At the same speed, how far will it travel in 5 hours?",
    "Tom has three apples and buys five more. How many apples does he have now?",
    "A rectangle is 8 cm long and 5 cm wide. What is the area of the rectangle?",
    "John buys 4 notebooks at $2.50 each and a pen for $1.20. He pays with a $20 bill. How much change does he get?",
    "If a spider has 8 legs, how many legs do 5 spiders have?",
    "Find the number of positive integers n less than 100 such that n^2 + n is divisible by 6.",
    "Sara is 4 years older than her brother, who is 9. How old will Sara be in 3 years?",
    "John has 3 + 4 apples in a basket. He eats 2 of them. How many apples are left?",
    "The meeting runs from 9:30 to 11:15. How long is the meeting in minutes?",
    "A train travels 60 km in 45 minutes. What is its speed in km/h?",
    "A shirt costs $20 and is on sale for 15% off. What is the sale price?",
]
# A program answers these exactly, though no arithmetic rule recognizes them.
COMPUTABLE = [
    "How many r's are in strawberry?",
    "Count the vowels in 'programming'.",
    "How many seconds are in 3 hours?",
    "Convert 5 km to meters.",
    "What is 255 in binary?",
    "Write 1994 in Roman numerals.",
    "What day of the week was 2024-03-15?",
    "If it is 10:45 now, what time will it be in 50 minutes?",
    "Sort these words alphabetically: pear, apple, fig.",
    "Arrange 5, 3, 9, 1 in descending order.",
    'Reverse the string "hello".',
    "Spell 'stressed' backwards.",
    "Is 'racecar' a palindrome?",
    "What is the 3rd letter of 'python'?",
    "Who is the tallest if Ann is taller than Bob and Bob is taller than Cy?",
    "A always lies and B always tells the truth. A says B is a liar. Who is telling the truth?",
    "Is 221 a prime number?",
    "Which is larger, 9.11 or 9.9?",
    "What is the 10th Fibonacci number?",
    "Round 3.14159 to two decimal places.",
    "Is 91 divisible by 7?",
]
CODE = [
    (
        'def has_close_elements(numbers: List[float], threshold: float) -> bool:\n    """ Check if in given list of '
        "numbers, are any two numbers closer to each other than given threshold.\n    >>> has_close_elements([1.0, "
        '2.0, 3.0], 0.5)\n    False\n    """\n'
    ),
    (
        'from typing import List\n\n\ndef separate_paren_groups(paren_string: str) -> List[str]:\n    """ Input to '
        'this function is a string containing multiple groups of nested parentheses."""\n'
    ),
    "Write a Python function that returns the sum of 2 numbers.",
    "Write a function that checks whether a string is a palindrome.",
    "Can you fix this bug?\n```python\nfor i in range(10)\n    print(i)\n```",
    "Implement quicksort in Rust.",
    "Write a SQL query that returns the 5 most recent orders for each customer.",
    "Why does this JavaScript function return undefined?\n\nfunction f(x) { x + 1 }",
    "Write a program that prints the first 20 Fibonacci numbers.",
    "Write code to compute 2 + 3 and print it.",
    "I have a list [1, 2, 3]. Write a function to reverse it.",
    "What does this Python function return for n = 3?",
]
OPEN = [
    "Explain why the sky is blue.",
    "Write a short poem about autumn.",
    "What is the capital of France?",
    "How many moons does Jupiter have?",
    "Summarize the plot of Hamlet in three sentences.",
    "Write an essay on the function of the liver.",
    "Prove that the square root of 2 is irrational.",
    "Translate 'I have 3 cats' into French.",
    "What happened in 1969 on the moon?",
    "Give me 5 ideas for a birthday party.",
    "Who won the World Cup in 2018?",
    "Prove that for every integer n, n^3 - n is divisible by 6.",
    "What are the pros and cons of remote work?",
    "Write a story about a python that lives in a zoo.",
    "Public transport in 2023 carried 3 million people a day. Discuss the trends.",
    "What happened on 2024-01-15 in the news?",
    "Explain how vaccines work.",
    # numbers that are names or counts of prose, not the subject of a calculation
    "Is Python 3 faster than Python 2?",
    "What is the plot of Apollo 13?",
    "What are 3 tips for sleeping better?",
    "Which 3 countries have the largest population?",
    "What does the number 42 mean in The Hitchhiker's Guide?",
]
CASES = [
    *((text, "arithmetic") for text in ARITHMETIC),
    *((text, "math_word") for text in MATH_WORD),
    *((text, "code") for text in CODE),
    *((text, "open") for text in OPEN),
    *((text, "computable") for text in COMPUTABLE),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_classifies_realistic_prompts(text: str, expected: str) -> None:
    assert classify_task(text) == expected


def test_every_type_is_covered_and_value_tasks_are_the_ones_a_program_answers() -> None:
    assert {kind for _, kind in CASES} == set(TASK_TYPES)
    assert {"arithmetic", "math_word", "computable"} == VALUE_TASKS


def test_the_estimator_reads_computable_as_the_open_it_was_fitted_on() -> None:
    assert "computable" not in FEATURE_TASK_TYPES
    assert feature_task("computable") == "open"
    assert [feature_task(t) for t in FEATURE_TASK_TYPES] == list(FEATURE_TASK_TYPES)


@pytest.mark.parametrize("text", ["", "   ", "42", "?", "\U0001f642"])
def test_degenerate_input_is_open_not_an_error(text: str) -> None:
    assert classify_task(text) == "open"


@pytest.mark.parametrize(
    ("question", "yes_no", "quantity"),
    [
        ("Is 221 a prime number?", True, False),
        ("Tell me whether 2020 is a leap year. Answer with Yes or No.", True, False),
        ("Which is larger, 9.11 or 9.9?", False, False),
        ("If today is Wednesday, what day of the week will it be in 12 days?", False, False),
        ("Tom has 3 apples and buys 5 more. How many does he have?", False, True),
        ("What is 17 + 25?", False, True),
        ("How many r's are in strawberry?", False, True),
        ("Sort these words alphabetically: pear, apple, fig.", False, False),
        ("Convert 5 km to meters.", False, True),
        ("What is 255 in binary?", False, True),
        ("How many letters are in 'strawberry'?", False, True),
        ("What is the 3rd letter of 'python'?", False, False),
    ],
)
def test_question_shapes_say_what_a_chains_last_number_is(question: str, yes_no: bool, quantity: bool) -> None:
    assert (asks_yes_or_no(question), asks_quantity(question)) == (yes_no, quantity)
