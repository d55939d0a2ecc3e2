"""Writes tests/data/answer_forms/prompts.json: questions as users type them, each with its value
computed here in Python and the reply's content expected for it.

Every value below is computed, not typed in: the problems are the kind a short program answers
(the default effort routes calculations to program-of-thought). Half of the prompts carry a form
instruction; ``expected_content`` is the reply in that form, or the default sentence ("The answer
is 42.") when none was asked. The halves are assigned by a fixed rule (see ``_halves``).

Run: ``.venv/bin/python scripts/answer_form_prompts.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable
from datetime import date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from string import Formatter
from typing import Any

import sympy

OUT = Path(__file__).resolve().parents[1] / "tests/data/answer_forms/prompts.json"
x, a, b = sympy.symbols("x a b")


def words(n: int) -> str:
    """An integer below a million in English words ("thirty-one"), for the expected content."""
    ones = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
    ]
    ones += ["sixteen", "seventeen", "eighteen", "nineteen"]
    tens = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
    if n < 20:
        return ones[n]
    if n < 100:
        return tens[n // 10] + ("" if n % 10 == 0 else "-" + ones[n % 10])
    if n < 1000:
        return ones[n // 100] + " hundred" + ("" if n % 100 == 0 else " " + words(n % 100))
    return words(n // 1000) + " thousand" + ("" if n % 1000 == 0 else " " + words(n % 1000))


def clock(minutes: int) -> str:
    return f"{minutes // 60 % 24:02d}:{minutes % 60:02d}"


def primes_between(low: int, high: int) -> list[int]:
    return [n for n in range(low, high + 1) if sympy.isprime(n)]


def factors(n: int) -> list[int]:
    return [p for p, k in sorted(sympy.factorint(n).items()) for _ in range(k)]


def written(expr: sympy.Expr) -> str:
    """An expression as a question that writes powers with ^ and products side by side writes it
    (``3x^2 + 2``, ``(x - 3)(x - 2)``, ``2ab``): its answer is written in the same notation."""
    return re.sub(r"(?<=[\w)])\*(?=[a-z(])", "", str(expr).replace("**", "^"))


def cplx(z: complex) -> str:
    """A complex number as a person writes it with i: ``11-2i``, ``i``, ``-8-6i``."""
    re_, im = int(z.real), int(z.imag)
    imag = {1: "i", -1: "-i"}.get(im, f"{im}i")
    if re_ == 0:
        return imag
    return f"{re_}{'+' if im > 0 else ''}{imag}" if im else str(re_)


def pct(value: float) -> str:
    text = f"{value:.10g}"
    return f"{text}%"


def yes(flag: bool) -> str:
    return "Yes" if flag else "No"


def weekday(d: date) -> str:
    return d.strftime("%A")


D = date.fromisoformat
F = Fraction
SENTENCE = "The answer is {}."

# (id, kind, question, value, instruction or None, phrasing, expected content, instruction stays)
# The instruction is appended to the question after a space unless the question holds "{i}".
# "stays": the instruction changes the number to compute (a unit, a rounding, a percentage), so
# it stays in the program's prompt as well as reaching the renderer.
Row = tuple[str, str, str, str, str | None, str, str, bool]
ROWS: list[Row] = [
    # integers
    ("int-mul", "integer", "What's 17 times 23?", str(17 * 23), None, "none", "", False),
    ("int-day-seconds", "integer", "how many seconds are there in a day", str(24 * 3600), None, "none", "", False),
    (
        "int-pencils",
        "integer",
        "If I have 3 boxes with 14 pencils each and give away 9 pencils, how many do I have left?",
        str(3 * 14 - 9),
        None,
        "none",
        "",
        False,
    ),
    ("int-gauss", "integer", "Sum of the integers from 1 to 100?", str(sum(range(101))), None, "none", "", False),
    (
        "int-pow",
        "integer",
        "What is 2 to the 12th power?",
        str(2**12),
        "I only want the number.",
        "only_want_number",
        "{v}",
        False,
    ),
    (
        "int-lineup",
        "integer",
        "How many ways can 5 people stand in a line?",
        str(math.factorial(5)),
        "Keep it to the number.",
        "keep_to_number",
        "{v}",
        False,
    ),
    (
        "int-tags",
        "integer",
        "What's 1001 minus 457?",
        str(1001 - 457),
        "Wrap the answer in <answer></answer> tags.",
        "answer_tags",
        "<answer>{v}</answer>",
        False,
    ),
    (
        "int-hashes",
        "integer",
        "Compute 12 factorial divided by 10 factorial.",
        str(math.factorial(12) // math.factorial(10)),
        "Put the final answer after '####'.",
        "after_hashes",
        "#### {v}",
        False,
    ),
    # decimals
    ("dec-div", "decimal", "What is 7 divided by 8?", str(7 / 8), None, "none", "", False),
    ("dec-mean", "decimal", "What's the average of 2.5, 3.75 and 4.1?", "3.45", None, "none", "", False),
    (
        "dec-speed",
        "decimal",
        "A car travels 150 km in 1.6 hours. What is its average speed in km/h?",
        str(150 / 1.6),
        None,
        "none",
        "",
        False,
    ),
    ("dec-sqrt", "decimal", "What is the square root of 2.25?", str(math.sqrt(2.25)), None, "none", "", False),
    (
        "dec-pi-ish",
        "decimal",
        "What is 22 divided by 7?",
        str(22 / 7),
        "Round to 2 decimal places.",
        "round_2dp",
        "The answer is {r2}.",
        True,
    ),
    (
        "dec-circle",
        "decimal",
        "Give me pi times 3 squared, {i}",
        str(math.pi * 9),
        "to three decimal places.",
        "to_n_decimal_places",
        "The answer is {r3}.",
        True,
    ),
    (
        "dec-seventh",
        "decimal",
        "{i} What's 1 divided by 7, accurate to 4 decimals?",
        str(1 / 7),
        "Just the number, no other text.",
        "just_number_no_other_text",
        "{r4}",
        False,
    ),
    (
        "dec-hypot",
        "decimal",
        "Calculate the hypotenuse of a right triangle with legs 5 and 7.",
        str(math.hypot(5, 7)),
        "Give the answer to the nearest hundredth.",
        "nearest_hundredth",
        "The answer is {r2}.",
        True,
    ),
    # fractions
    ("frac-sum", "fraction", "What is 1/3 + 1/4?", str(F(1, 3) + F(1, 4)), None, "none", "", False),
    ("frac-simplify", "fraction", "Simplify 18/24.", str(F(18, 24)), None, "none", "", False),
    ("frac-hour", "fraction", "What fraction of an hour is 25 minutes?", str(F(25, 60)), None, "none", "", False),
    ("frac-mul", "fraction", "Multiply 2/3 by 9/10.", str(F(2, 3) * F(9, 10)), None, "none", "", False),
    (
        "frac-lowest",
        "fraction",
        "What is 3/8 + 5/12?",
        str(F(3, 8) + F(5, 12)),
        "Give your answer as a fraction in lowest terms.",
        "fraction_lowest_terms",
        "The answer is {v}.",
        False,
    ),
    (
        "frac-decimal",
        "fraction",
        "What is 0.375 written as a fraction?",
        str(F(3, 8)),
        "Reply with just the fraction.",
        "reply_just_fraction",
        "{v}",
        False,
    ),
    (
        "frac-improper",
        "fraction",
        "Subtract 1/4 from 7/3.",
        str(F(7, 3) - F(1, 4)),
        "Express the result as an improper fraction, nothing else.",
        "improper_fraction_nothing_else",
        "{v}",
        False,
    ),
    (
        "frac-of",
        "fraction",
        "What's 2/5 of 3/4?",
        str(F(2, 5) * F(3, 4)),
        "Format the answer as numerator/denominator.",
        "numerator_denominator",
        "The answer is {v}.",
        False,
    ),
    # percentages
    ("pct-of", "percentage", "What percentage of 80 is 20?", pct(20 / 80 * 100), None, "none", "", False),
    (
        "pct-drop",
        "percentage",
        "A shirt's price dropped from $50 to $35. By what percent did it decrease?",
        pct((50 - 35) / 50 * 100),
        None,
        "none",
        "",
        False,
    ),
    ("pct-share", "percentage", "What percentage is 7 out of 20?", pct(7 / 20 * 100), None, "none", "", False),
    (
        "pct-passed",
        "percentage",
        "If 45 of 60 students passed, what percent passed?",
        pct(45 / 60 * 100),
        None,
        "none",
        "",
        False,
    ),
    (
        "pct-one-decimal",
        "percentage",
        "What share of 64 is 12?",
        pct(12 / 64 * 100),
        "Give it as a percentage with one decimal.",
        "percentage_one_decimal",
        "The answer is {r1}%.",
        True,
    ),
    (
        "pct-just",
        "percentage",
        "What percent of 250 is 40?",
        pct(40 / 250 * 100),
        "Reply with just the percentage.",
        "reply_just_percentage",
        "{v}",
        False,
    ),
    (
        "pct-json",
        "percentage",
        "Out of 40 questions I got 34 right. What's my score as a percentage?",
        pct(34 / 40 * 100),
        'Respond in JSON like {"answer": ...}.',
        "json_answer_key",
        '{{"answer": "{v}"}}',
        False,
    ),
    (
        "pct-growth",
        "percentage",
        "A population grew from 1200 to 1500. What's the percentage increase?",
        pct((1500 - 1200) / 1200 * 100),
        "no other text",
        "no_other_text",
        "{v}",
        False,
    ),
    # lists and sorted lists
    (
        "list-primes",
        "list",
        "List the prime numbers between 10 and 30.",
        str(primes_between(10, 30)),
        None,
        "none",
        "",
        False,
    ),
    (
        "list-sort",
        "list",
        "Sort these numbers from smallest to largest: 42, 7, 19, 3, 28",
        str(sorted([42, 7, 19, 3, 28])),
        None,
        "none",
        "",
        False,
    ),
    (
        "list-fib",
        "list",
        "What are the first 8 Fibonacci numbers, starting 1, 1?",
        str([1, 1, 2, 3, 5, 8, 13, 21]),
        None,
        "none",
        "",
        False,
    ),
    (
        "list-alpha",
        "list",
        "Put these words in alphabetical order: pear, fig, apple, kiwi",
        str(sorted(["pear", "fig", "apple", "kiwi"])),
        None,
        "none",
        "",
        False,
    ),
    (
        "list-common-multiples",
        "list",
        "Which numbers from 1 to 30 are divisible by both 4 and 6?",
        str([n for n in range(1, 31) if n % 4 == 0 and n % 6 == 0]),
        "Separate the items with semicolons.",
        "separate_with_semicolons",
        "The answer is {semi}.",
        False,
    ),
    (
        "list-descending",
        "list",
        "Sort 9, -2, 14, 0, 5 in descending order.",
        str(sorted([9, -2, 14, 0, 5], reverse=True)),
        "One number per line, nothing else.",
        "one_number_per_line_nothing_else",
        "{lines}",
        False,
    ),
    (
        "list-multiples",
        "list",
        "List the multiples of 7 between 50 and 100.",
        str(list(range(56, 101, 7))),
        "Comma separated please.",
        "comma_separated_please",
        "The answer is {commas}.",
        False,
    ),
    (
        "list-letters",
        "list",
        "Sort the letters of the word 'python' alphabetically.",
        str(sorted("python")),
        "Separate them with a single space.",
        "separate_with_space",
        "The answer is {spaces}.",
        False,
    ),
    # sets
    (
        "set-intersection",
        "set",
        "What is the intersection of {1, 2, 3, 4, 5} and {4, 5, 6, 7}?",
        "{4, 5}",
        None,
        "none",
        "",
        False,
    ),
    (
        "set-union",
        "set",
        "What is the union of {1, 3, 5} and {3, 4, 5, 6}?",
        "{1, 3, 4, 5, 6}",
        None,
        "none",
        "",
        False,
    ),
    (
        "set-difference",
        "set",
        "Which elements are in A = {2, 4, 6, 8, 10} but not in B = {4, 8, 12}?",
        "{2, 6, 10}",
        None,
        "none",
        "",
        False,
    ),
    (
        "set-remainders",
        "set",
        "What is the set of remainders when the squares of 1 through 10 are divided by 5?",
        "{" + ", ".join(str(r) for r in sorted({n * n % 5 for n in range(1, 11)})) + "}",
        None,
        "none",
        "",
        False,
    ),
    (
        "set-symmetric",
        "set",
        "Find the symmetric difference of {1, 2, 3, 4} and {3, 4, 5}.",
        "{" + ", ".join(str(n) for n in sorted({1, 2, 3, 4} ^ {3, 4, 5})) + "}",
        "Write the set in curly braces.",
        "set_in_curly_braces",
        "The answer is {v}.",
        False,
    ),
    (
        "set-odd-primes",
        "set",
        "What is the set of primes below 20 intersected with the set of odd numbers?",
        "{" + ", ".join(str(n) for n in primes_between(3, 19)) + "}",
        "Just list the elements separated by commas.",
        "just_list_elements_commas",
        "{commas}",
        False,
    ),
    (
        "set-divisors",
        "set",
        "Which numbers between 1 and 10 divide 36?",
        "{" + ", ".join(str(n) for n in range(1, 11) if 36 % n == 0) + "}",
        "Answer with the set only.",
        "answer_with_set_only",
        "{v}",
        False,
    ),
    (
        "set-minus",
        "set",
        "What is {1, 2, 3} minus {2}?",
        "{1, 3}",
        "Respond with only the set, no other text.",
        "respond_only_set_no_other_text",
        "{v}",
        False,
    ),
    # factorizations
    ("fac-360", "factorization", "What is the prime factorization of 360?", "2^3 * 3^2 * 5", None, "none", "", False),
    (
        "fac-221",
        "factorization",
        "Factor 221 into primes.",
        " * ".join(map(str, factors(221))),
        None,
        "none",
        "",
        False,
    ),
    ("fac-84", "factorization", "Break 84 down into its prime factors.", str(factors(84)), None, "none", "", False),
    (
        "fac-1001",
        "factorization",
        "Prime factors of 1001?",
        " * ".join(map(str, factors(1001))),
        None,
        "none",
        "",
        False,
    ),
    (
        "fac-times",
        "factorization",
        "Write 126 as a product of primes.",
        str(factors(126)),
        "Use \u00d7 between the factors.",
        "times_between_factors",
        "The answer is {times}.",
        False,
    ),
    (
        "fac-500",
        "factorization",
        "What are the prime factors of 500, with repetition?",
        str(factors(500)),
        "List them separated by commas and nothing else.",
        "separated_by_commas_nothing_else",
        "{commas}",
        False,
    ),
    (
        "fac-2024",
        "factorization",
        "Factorize 2024.",
        str(factors(2024)),
        "Reply in the form p1*p2*...*pk with no spaces.",
        "form_product_no_spaces",
        "{stars}",
        False,
    ),
    (
        "fac-945",
        "factorization",
        "Decompose 945 into prime factors.",
        "3^3 * 5 * 7",
        "Write it with exponents, like 2^2 * 3.",
        "exponents_like_example",
        "{v}",
        False,
    ),
    # complex numbers
    ("cx-mul", "complex", "What is (2+3i)(4-i)?", cplx((2 + 3j) * (4 - 1j)), None, "none", "", False),
    ("cx-square", "complex", "Compute (1+2i)^2.", cplx((1 + 2j) ** 2), None, "none", "", False),
    ("cx-div", "complex", "What is (5+5i)/(1+2i)?", cplx((5 + 5j) / (1 + 2j)), None, "none", "", False),
    (
        "cx-conj",
        "complex",
        "What is the complex conjugate of (7-2i) times i?",
        cplx(((7 - 2j) * 1j).conjugate()),
        None,
        "none",
        "",
        False,
    ),
    (
        "cx-form",
        "complex",
        "Multiply (3+4i) by (1-2i).",
        cplx((3 + 4j) * (1 - 2j)),
        "Give the answer in the form a+bi.",
        "form_a_plus_bi",
        "{v}",
        False,
    ),
    (
        "cx-form-only",
        "complex",
        "What is the square of 1-3i?",
        cplx((1 - 3j) ** 2),
        "Answer in a + bi form only.",
        "a_plus_bi_form_only",
        "{v}",
        False,
    ),
    (
        "cx-box",
        "complex",
        "What is i^3 + 2i?",
        cplx(1j**3 + 2j),
        "Box your answer.",
        "box_your_answer",
        "\\boxed{{{v}}}",
        False,
    ),
    (
        "cx-tags",
        "complex",
        "Add (4-7i) and (-1+2i).",
        cplx((4 - 7j) + (-1 + 2j)),
        "Wrap it in <answer> tags.",
        "wrap_in_answer_tags",
        "<answer>{v}</answer>",
        False,
    ),
    # times and durations
    (
        "time-after",
        "time",
        "What time is it 3 hours and 45 minutes after 10:30?",
        clock(10 * 60 + 30 + 225),
        None,
        "none",
        "",
        False,
    ),
    (
        "time-between",
        "time",
        "How many minutes are there between 9:40 and 13:05?",
        str(13 * 60 + 5 - (9 * 60 + 40)),
        None,
        "none",
        "",
        False,
    ),
    (
        "time-movie",
        "time",
        "A movie starts at 19:50 and lasts 2 hours 35 minutes. When does it end?",
        clock(19 * 60 + 50 + 155),
        None,
        "none",
        "",
        False,
    ),
    (
        "time-seconds",
        "time",
        "Convert 9000 seconds to hours and minutes.",
        f"{9000 // 3600} hours {9000 % 3600 // 60} minutes",
        None,
        "none",
        "",
        False,
    ),
    (
        "time-flight",
        "time",
        "If a flight leaves at 22:40 and takes 5 h 35 min, what time does it land?",
        clock(22 * 60 + 40 + 335),
        "Answer in HH:MM.",
        "in_hh_mm",
        "{v}",
        False,
    ),
    (
        "time-duration",
        "time",
        "How long is it from 08:15 to 17:50?",
        "{}:{:02d}".format(*divmod(17 * 60 + 50 - (8 * 60 + 15), 60)),
        "Give the duration as H:MM, nothing else.",
        "duration_h_mm_nothing_else",
        "{v}",
        False,
    ),
    (
        "time-hms",
        "time",
        "How long is 10,000 seconds in hours, minutes and seconds?",
        f"{10000 // 3600}:{10000 % 3600 // 60:02d}:{10000 % 60:02d}",
        "Answer as H:MM:SS.",
        "as_h_mm_ss",
        "{v}",
        False,
    ),
    (
        "time-24h",
        "time",
        "What time will it be 500 minutes after 11:20 PM?",
        clock(23 * 60 + 20 + 500),
        "Reply in 24-hour HH:MM format, no other text.",
        "hh_mm_24h_no_other_text",
        "{v}",
        False,
    ),
    # dates and weekdays
    (
        "date-plus",
        "date",
        "What date is 100 days after 2024-01-15?",
        str(D("2024-01-15") + timedelta(100)),
        None,
        "none",
        "",
        False,
    ),
    (
        "date-weekday",
        "date",
        "What day of the week was July 4, 1976?",
        weekday(date(1976, 7, 4)),
        None,
        "none",
        "",
        False,
    ),
    (
        "date-between",
        "date",
        "How many days are there between March 3, 2023 and October 19, 2023?",
        str((date(2023, 10, 19) - date(2023, 3, 3)).days),
        None,
        "none",
        "",
        False,
    ),
    (
        "date-2030",
        "date",
        "What day of the week will 2030-01-01 fall on?",
        weekday(date(2030, 1, 1)),
        None,
        "none",
        "",
        False,
    ),
    (
        "date-iso",
        "date",
        "What's the date 45 days before 2025-03-10?",
        str(D("2025-03-10") - timedelta(45)),
        "Give it as YYYY-MM-DD.",
        "as_yyyy_mm_dd",
        "{v}",
        False,
    ),
    (
        "date-dmy",
        "date",
        "What date is 6 weeks after 12/28/2023 (month/day/year)?",
        str(date(2023, 12, 28) + timedelta(weeks=6)),
        "Answer as DD/MM/YYYY.",
        "as_dd_mm_yyyy",
        "{dmy}",
        False,
    ),
    (
        "date-y2k",
        "date",
        "What day of the week was 1 January 2000?",
        weekday(date(2000, 1, 1)),
        "Just the day name, in lowercase.",
        "just_day_name_lowercase",
        "{lower}",
        False,
    ),
    (
        "date-xmas",
        "date",
        "Which weekday is 2026-12-25?",
        weekday(date(2026, 12, 25)),
        "Write the answer in uppercase letters.",
        "uppercase_letters",
        "The answer is {upper}.",
        False,
    ),
    # yes / no
    ("yn-prime", "yes_no", "Is 221 a prime number?", yes(sympy.isprime(221)), None, "none", "", False),
    (
        "yn-leap",
        "yes_no",
        "Is 2024 a leap year?",
        yes(2024 % 4 == 0 and (2024 % 100 != 0 or 2024 % 400 == 0)),
        None,
        "none",
        "",
        False,
    ),
    ("yn-compare", "yes_no", "Is 3/7 greater than 0.43?", yes(F(3, 7) > F(43, 100)), None, "none", "", False),
    ("yn-divides", "yes_no", "Does 17 divide 391?", yes(391 % 17 == 0), None, "none", "", False),
    (
        "yn-1001",
        "yes_no",
        "Is 1001 divisible by 7?",
        yes(1001 % 7 == 0),
        "Just yes or no.",
        "just_yes_or_no",
        "{v}",
        False,
    ),
    (
        "yn-square",
        "yes_no",
        "Is the sum of the first 10 odd numbers a perfect square?",
        yes(math.isqrt(sum(range(1, 20, 2))) ** 2 == sum(range(1, 20, 2))),
        "Answer yes or no, in lowercase.",
        "yes_or_no_lowercase",
        "{lower}",
        False,
    ),
    (
        "yn-goldbach",
        "yes_no",
        "Can 64 be written as a sum of two primes?",
        yes(any(sympy.isprime(p) and sympy.isprime(64 - p) for p in range(2, 63))),
        "Reply Y or N.",
        "reply_y_or_n",
        "{yn}",
        False,
    ),
    (
        "yn-97",
        "yes_no",
        "Is 97 prime?",
        yes(sympy.isprime(97)),
        "Answer with one word: Yes or No.",
        "one_word_yes_or_no",
        "{v}",
        False,
    ),
    # true / false
    (
        "tf-powers",
        "true_false",
        "True or false: 2^10 is greater than 10^3.",
        str(2**10 > 10**3),
        None,
        "none",
        "",
        False,
    ),
    (
        "tf-pentagon",
        "true_false",
        "True or false: the interior angles of a pentagon add up to 540 degrees.",
        str((5 - 2) * 180 == 540),
        None,
        "none",
        "",
        False,
    ),
    ("tf-91", "true_false", "True or false? 91 is prime.", str(sympy.isprime(91)), None, "none", "", False),
    ("tf-13", "true_false", "True or false: 13 squared is 169.", str(13**2 == 169), None, "none", "", False),
    (
        "tf-fib",
        "true_false",
        "Statement: the 10th Fibonacci number is 55 (counting 1, 1, 2, ...).",
        str(sympy.fibonacci(10) == 55),
        "Reply with True or False only.",
        "true_or_false_only",
        "{v}",
        False,
    ),
    (
        "tf-caps",
        "true_false",
        "Is it true that 3^4 < 4^3?",
        str(3**4 < 4**3),
        "Answer TRUE or FALSE.",
        "answer_true_false_caps",
        "{upper}",
        False,
    ),
    (
        "tf-cube",
        "true_false",
        "Is the statement '100 is a perfect cube' true or false?",
        str(round(100 ** (1 / 3)) ** 3 == 100),
        "Output a boolean, no other text.",
        "output_boolean_no_other_text",
        "{v}",
        False,
    ),
    (
        "tf-box",
        "true_false",
        "True/false: 144 is divisible by both 8 and 9.",
        str(144 % 8 == 0 and 144 % 9 == 0),
        "Put your answer in \\boxed{}.",
        "put_in_boxed",
        "\\boxed{{{v}}}",
        False,
    ),
    # single words
    (
        "word-planet",
        "word",
        "Which is the largest of these planets: Mars, Jupiter, Venus?",
        max({"Mars": 6779, "Jupiter": 139820, "Venus": 12104}.items(), key=lambda kv: kv[1])[0],
        None,
        "none",
        "",
        False,
    ),
    (
        "word-first",
        "word",
        "Which word comes first alphabetically: zebra, mango, apple, kiwi?",
        min(["zebra", "mango", "apple", "kiwi"]),
        None,
        "none",
        "",
        False,
    ),
    (
        "word-longest",
        "word",
        "Which of these words has the most letters: cat, elephant, giraffe, hippopotamus?",
        max(["cat", "elephant", "giraffe", "hippopotamus"], key=len),
        None,
        "none",
        "",
        False,
    ),
    (
        "word-fifth",
        "word",
        "What is the 5th word in the sentence 'the quick brown fox jumps over the lazy dog'?",
        ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"][4],
        None,
        "none",
        "",
        False,
    ),
    (
        "word-programming",
        "word",
        "What's the longest word in 'I love programming in Python'?",
        max(["I", "love", "programming", "in", "Python"], key=len),
        "One word answer.",
        "one_word_answer",
        "{v}",
        False,
    ),
    (
        "word-month",
        "word",
        "Which month comes 7 months after March?",
        datetime(2000, 3 + 7, 1).strftime("%B"),
        "Respond with a single word.",
        "respond_single_word",
        "{v}",
        False,
    ),
    (
        "word-color",
        "word",
        "Which color appears most often: red, blue, red, green, blue, red?",
        max(set(c := ["red", "blue", "red", "green", "blue", "red"]), key=c.count),
        "Give the answer in capital letters.",
        "capital_letters",
        "The answer is {upper}.",
        False,
    ),
    (
        "word-last",
        "word",
        "What's the last word alphabetically among orange, banana, cherry?",
        max(["orange", "banana", "cherry"]),
        "Reply in lowercase with just the word.",
        "lowercase_just_word",
        "{lower}",
        False,
    ),
    # transformed strings
    ("str-reverse", "string", "Reverse the string 'algorithm'.", "algorithm"[::-1], None, "none", "", False),
    (
        "str-vowels",
        "string",
        "What is 'Hello World' with every vowel removed?",
        "".join(ch for ch in "Hello World" if ch.lower() not in "aeiou"),
        None,
        "none",
        "",
        False,
    ),
    ("str-binary", "string", "Convert 255 to binary.", format(255, "b"), None, "none", "", False),
    (
        "str-title",
        "string",
        "What do you get if you capitalize the first letter of each word in 'the rain in spain'?",
        "the rain in spain".title(),
        None,
        "none",
        "",
        False,
    ),
    (
        "str-stressed",
        "string",
        "Reverse the word 'stressed'.",
        "stressed"[::-1],
        "Write it in uppercase.",
        "write_in_uppercase",
        "The answer is {upper}.",
        False,
    ),
    (
        "str-snake",
        "string",
        "Convert 'Data Science' to snake_case.",
        "Data Science".lower().replace(" ", "_"),
        "Output only the converted string.",
        "output_only_converted_string",
        "{v}",
        False,
    ),
    (
        "str-repeat",
        "string",
        "What is 'abc' repeated 3 times with dashes between?",
        "-".join(["abc"] * 3),
        "Wrap your answer in double quotes.",
        "wrap_in_double_quotes",
        '"{v}"',
        False,
    ),
    (
        "str-caesar",
        "string",
        "Encode 'hi' with a Caesar shift of 3.",
        "".join(chr((ord(ch) - 97 + 3) % 26 + 97) for ch in "hi"),
        "Give me the result after 'Answer:'.",
        "result_after_answer_label",
        "Answer: {v}",
        False,
    ),
    # expressions (each written in its question's notation: ^ and products side by side, or Python's)
    (
        "expr-expand",
        "expression",
        "Expand (x + 3)(x - 5).",
        written(sympy.expand((x + 3) * (x - 5))),
        None,
        "none",
        "",
        False,
    ),
    (
        "expr-diff",
        "expression",
        "Differentiate x^3 + 2x with respect to x.",
        written(sympy.diff(x**3 + 2 * x, x)),
        None,
        "none",
        "",
        False,
    ),
    (
        "expr-cancel",
        "expression",
        "Simplify (x^2 - 9)/(x - 3).",
        written(sympy.cancel((x**2 - 9) / (x - 3))),
        None,
        "none",
        "",
        False,
    ),
    (
        "expr-product-rule",
        "expression",
        "What is the derivative of x*sin(x)?",
        str(sympy.diff(x * sympy.sin(x), x)),
        None,
        "none",
        "",
        False,
    ),
    (
        "expr-factor",
        "expression",
        "Factor x^2 - 5x + 6.",
        written(sympy.factor(x**2 - 5 * x + 6)),
        "Just give the factored expression.",
        "just_factored_expression",
        "{v}",
        False,
    ),
    (
        "expr-integrate",
        "expression",
        "Integrate 6x^2 with respect to x, omitting the constant.",
        written(sympy.integrate(6 * x**2, x)),
        "Format your answer as 'Result: <expression>'.",
        "format_result_template",
        "Result: {v}",
        False,
    ),
    (
        "expr-square",
        "expression",
        "Expand (a + b)^2.",
        written(sympy.expand((a + b) ** 2)),
        "Reply with the expression only, nothing else.",
        "expression_only_nothing_else",
        "{v}",
        False,
    ),
    (
        "expr-linear",
        "expression",
        "Simplify 2(x + 4) - 3(x - 1).",
        written(sympy.expand(2 * (x + 4) - 3 * (x - 1))),
        "Respond with only the simplified expression, no other text.",
        "only_simplified_expression_no_other_text",
        "{v}",
        False,
    ),
    # quantities with units
    ("qty-cm", "quantity", "How many centimeters are in 3.5 meters?", str(round(3.5 * 100)), None, "none", "", False),
    (
        "qty-distance",
        "quantity",
        "A car goes 60 km/h for 2.5 hours. How far does it travel?",
        f"{round(60 * 2.5)} km",
        None,
        "none",
        "",
        False,
    ),
    ("qty-kg", "quantity", "What is 2500 g in kilograms?", f"{2500 / 1000} kg", None, "none", "", False),
    (
        "qty-area",
        "quantity",
        "A rectangle is 4 m by 6.5 m. What is its area?",
        f"{round(4 * 6.5)} m²",
        None,
        "none",
        "",
        False,
    ),
    (
        "qty-meters",
        "quantity",
        "How far do you go walking at 5 km/h for 3 hours?",
        str(5 * 3 * 1000),
        "Give the answer in meters.",
        "give_answer_in_unit",
        "The answer is {v} meters.",
        True,
    ),
    (
        "qty-min",
        "quantity",
        "What is 2.5 hours in minutes?",
        str(round(2.5 * 60)),
        "Reply with the number followed by 'min'.",
        "number_followed_by_unit",
        "{v} min",
        False,
    ),
    (
        "qty-grams",
        "quantity",
        "How many grams are in 3.2 kilograms?",
        f"{round(3.2 * 1000)} g",
        "State only the numeric value, without units.",
        "numeric_value_without_units",
        "{n}",
        False,
    ),
    (
        "qty-tank",
        "quantity",
        "A tank holds 40 liters and leaks 1.5 liters per hour. How many liters are left after 6 hours?",
        str(round(40 - 1.5 * 6)),
        "Write the answer in words.",
        "answer_in_words",
        "The answer is {words}.",
        False,
    ),
]


def _items(value: str) -> list[str]:
    inner = value.strip("[]{}")
    return [item.strip().strip("'") for item in inner.split(",")]


def _content(value: str, pattern: str) -> str:
    """The expected content: ``pattern`` filled with the value in the shapes the rows name."""
    number = value.rstrip("%").split()[0]
    shapes: dict[str, Callable[[], str]] = {
        "v": lambda: value,
        "n": lambda: number,
        "lower": value.lower,
        "upper": value.upper,
        "r1": lambda: f"{float(number):.1f}",
        "r2": lambda: f"{float(number):.2f}",
        "r3": lambda: f"{float(number):.3f}",
        "r4": lambda: f"{float(number):.4f}",
        "semi": lambda: "; ".join(_items(value)),
        "commas": lambda: ", ".join(_items(value)),
        "spaces": lambda: " ".join(_items(value)),
        "times": lambda: " \u00d7 ".join(_items(value)),
        "stars": lambda: "*".join(_items(value)),
        "lines": lambda: "\n".join(_items(value)),
        "yn": lambda: value[0],
        "dmy": lambda: date.fromisoformat(value).strftime("%d/%m/%Y"),
        "words": lambda: words(int(number)),
    }
    names = {field for _, field, _, _ in Formatter().parse(pattern) if field}
    return pattern.format(**{name: shapes[name]() for name in names})


def _default(value: str) -> str:
    """The reply when no form was asked: one sentence, a printed list written as a person lists it."""
    shown = ", ".join(_items(value)) if value.startswith("[") else value
    return SENTENCE.format(shown)


def _halves(entries: list[dict[str, Any]]) -> None:
    """Within each kind, the prompts with a form instruction and those without are each ordered by
    the SHA-256 of their id; the 1st, 3rd, ... of each order are "tested", the others "kept_apart"."""
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        groups[(entry["kind"], entry["phrasing"] != "none")].append(entry)
    for group in groups.values():
        group.sort(key=lambda e: hashlib.sha256(e["id"].encode()).hexdigest())
        for rank, entry in enumerate(group):
            entry["half"] = "tested" if rank % 2 == 0 else "kept_apart"


def build() -> dict[str, Any]:
    entries = []
    for ident, kind, question, value, instruction, phrasing, pattern, stays in ROWS:
        if instruction is None:
            prompt = question
        elif "{i}" in question:
            prompt, question = question.replace("{i}", instruction), question.replace("{i}", "").strip()
        else:
            prompt = f"{question} {instruction}"
        entries.append(
            {
                "id": ident,
                "kind": kind,
                "prompt": prompt,
                "question": question,
                "instruction": instruction,
                "expected": value,
                "expected_content": _content(value, pattern) if instruction else _default(value),
                "phrasing": phrasing,
                "instruction_stays": stays,
            }
        )
    _halves(entries)
    return {
        "about": (
            "Questions as users type them, over many kinds of answer; half carry a form instruction. "
            "expected: the correct answer's value (computed by scripts/answer_form_prompts.py); "
            "expected_content: the reply's exact content for that value in the asked form, or the default "
            "sentence 'The answer is <value>.' when no form was asked; question: the prompt without its "
            "instruction (what a program is asked); instruction: the form instruction (null when none); "
            "phrasing: the instruction's phrasing ('none' without one); instruction_stays: the instruction "
            "changes the number to compute (a unit, a rounding, a percentage) and stays in the program's prompt."
        ),
        "halves": (
            "Within each kind, the prompts with a form instruction and those without are each ordered by the "
            "SHA-256 hex digest of their id; the 1st, 3rd, ... of each order are 'tested' (the parser is tuned "
            "on them, tests/unit/common/test_answer_form_prompts.py), the others 'kept_apart' (judged once, "
            "end to end, never tuned on)."
        ),
        "prompts": entries,
    }


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n")
