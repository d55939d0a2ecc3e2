"""A value is written in the notation its question asks for or writes its own values in:
fractions, percentages, complex numbers, factorizations, expressions, quantities with units,
dates and times, LaTeX a chain of thought states, and what a short chain of thought states."""

from __future__ import annotations

import pytest

from services.common.answer_complex import complex_text, imaginary_unit
from services.common.answer_expressions import algebra_notation, in_notation
from services.common.answer_factors import asked_exponents, factor_pairs, factored
from services.common.answer_form import parse_form, render, strip_form
from services.common.answer_latex import plain
from services.common.answer_numbers import number_text, writes_fractions
from services.common.answer_reading import stated_value
from services.common.answer_shapes import as_written, written_times
from services.common.answer_units import asked_unit
from services.search.interfaces import Message, Shape
from services.search.presentation import present
from services.search.strategies.results import Choice

TIMES = "\u00d7"


@pytest.mark.parametrize(
    ("question", "writes"),
    [
        ("What is 1/3 + 1/4?", True),
        ("Multiply 2/3 by 9/10.", True),
        ("What fraction of a day is 6 hours?", True),
        ("Subtract 1/4 from 7/3.", True),
        ("What is 1/4 of 10?", False),  # not every number a fraction: 2.5 stays
        ("What is 3/8 as a decimal?", False),  # a decimal asked for
        ("What is 22/7 to two decimal places?", False),
        ("Is 3/7 greater than 0.43?", False),  # the question writes a decimal too
        ("What is 84 / 2?", False),  # a spaced slash divides
        ("What date is 30 days after 12/28/2023?", False),  # a date is no fraction
        ("A car drives at 60 km/h for 2 hours.", False),
        ("What percentage is 1/4?", False),
    ],
)
def test_a_question_that_writes_fractions(question: str, writes: bool) -> None:
    assert writes_fractions(question) is writes


def test_a_float_that_is_a_simple_fraction_is_written_as_one_where_the_question_writes_fractions() -> None:
    assert number_text("0.5833333333333333", fractions_written=True) == "7/12"
    assert number_text("0.30000000000000004", fractions_written=True) == "3/10"
    assert number_text("33.333333333333336", fractions_written=True) == "100/3"
    assert number_text("1.4142135623730951", fractions_written=True) == "1.4142135623730951"  # no simple fraction
    assert number_text("0.1429", fractions_written=True) == "0.1429"
    assert number_text("548/1040", fractions_written=True) == "548/1040"  # a printed ratio stays as printed
    assert number_text("0.5833333333333333") == "0.5833333333333333"
    assert render("0.6", parse_form("Multiply 2/3 by 9/10.")) == "The answer is 3/5."
    assert render("0.875", parse_form("What is 7 divided by 8?")) == "The answer is 0.875."


@pytest.mark.parametrize(
    ("question", "unit"),
    [
        ("What percentage of 80 is 20?", "%"),
        ("If 45 of 60 students passed, what percent passed?", "%"),
        ("By what percent did the price fall from $50 to $35?", "%"),
        ("Find the percentage increase from 1200 to 1500.", "%"),
        ("What's my score as a percentage?", "%"),
        ("How much is 40 of 250, in percent?", "%"),
        ("What is 15% of 80?", None),  # a percentage given, a quantity asked
        ("What is 15 percent of 80?", None),
        ("A rectangle is 4 m by 6.5 m. What is its area?", "m²"),
        ("A cube has edges of 3 cm. What is its volume?", "cm³"),
        ("A square has sides of 5 meters. Find the perimeter.", "meters"),
        ("A field is 4 m by 6 ft. What is its area?", None),  # two units: nothing to square
        ("A rectangle is 4 by 6. What is its area?", None),
        ("How many centimeters are in 3.5 meters?", None),  # the unit counted: the number alone
        ("How far is it? Give the answer in meters.", "meters"),
        ("What is the speed? Give the answer in km/h.", "km/h"),
        ("When does it land? Answer in HH:MM.", None),  # a pattern, not a unit
        ("What is the date? Answer in DD/MM/YYYY.", None),
        ("How long is the screw? Answer in mm.", "mm"),
    ],
)
def test_the_unit_asked_for(question: str, unit: str | None) -> None:
    assert asked_unit(question) == unit


def test_a_percentage_or_a_measure_keeps_its_unit_after_the_number() -> None:
    assert render("25.0", parse_form("What percentage of 80 is 20?")) == "The answer is 25%."
    assert render("16.0", parse_form("What percent of 250 is 40? Reply with just the percentage.")) == "16%"
    assert render("16.0", parse_form("What percent of 250 is 40? Reply with just the number.")) == "16"
    assert render("18.75", parse_form("What share of 64 is 12? Give it as a percentage with one decimal.")) == (
        "The answer is 18.8%."
    )
    assert render("26.0", parse_form("A rectangle is 4 m by 6.5 m. What is its area?")) == "The answer is 26 m²."
    question = "What percentage of 80 is 20?"
    assert strip_form(question) == question  # the percentage changes the number to compute: it stays


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("(-3+4j)", "-3+4i"),
        ("3j", "3i"),
        ("-1j", "-i"),
        ("(3-1j)", "3-i"),
        ("(-0-6j)", "-6i"),
        ("(1+0j)", "1"),
        ("(2.5+0.5j)", "2.5+0.5i"),
        ("-3 + 4*I", "-3+4i"),
        ("I", "i"),
        ("2 - 7*I", "2-7i"),
        ("-3 + 4i", "-3+4i"),
        ("5", None),
        ("abc", None),
        ("(1 + 2*I)**2", None),  # unexpanded: not a value
    ],
)
def test_a_complex_number_in_any_printed_spelling(value: str, written: str | None) -> None:
    assert complex_text(value) == written


def test_the_imaginary_unit_a_question_writes() -> None:
    assert imaginary_unit("Compute (1+2i)^2.") == "i"
    assert imaginary_unit("What is i^3 + 2i?") == "i"
    assert imaginary_unit("Give it in the form a + bi.") == "i"
    assert imaginary_unit("What is (2+3j) times 3j?") == "j"
    assert imaginary_unit("What is the square root of -9?") is None
    assert imaginary_unit("how many r's are there, i think three?") is None


def test_an_example_or_a_shown_product_says_how_repeated_factors_are_written() -> None:
    assert asked_exponents("Write it with exponents.", "2^2 * 3") == "^"
    assert asked_exponents("Format your answer like this.", "2 * 2 * 3") == ""
    assert asked_exponents("Factor 60 (e.g. 2**2 * 3 * 5).") == "**"
    assert asked_exponents("Factor 60.") is None
    assert asked_exponents("List the prime factors of 12.", "[2, 2, 3]") is None  # a list's shape, not a product's


def test_factorizations_in_every_printed_shape_take_the_asked_one() -> None:
    shapes = ("[3, 3, 3, 5, 7]", "(3, 3, 3, 5, 7)", "{3: 3, 5: 1, 7: 1}", "3**3 * 5 * 7", f"3^3 {TIMES} 5 {TIMES} 7")
    for printed in shapes:
        assert factor_pairs(printed) == [(3, 3), (5, 1), (7, 1)]
        assert factored(printed, "^", " * ") == "3^3 * 5 * 7"
        assert factored(printed, "**", None) == "3**3 * 5 * 7"
        assert factored(printed, "", f" {TIMES} ") == f"3 {TIMES} 3 {TIMES} 3 {TIMES} 5 {TIMES} 7"
        assert factored(printed, None, ", ") == "3, 3, 3, 5, 7"  # a list's separator: one by one
    assert factored("{2: 2, 3: 1}", None, None) == "2^2 * 3"  # a dict is no one's way to write it
    assert factored("[2, 2, 3]", None, None) is None  # nothing asked: the list as printed
    assert factored("[2, 2, 3]", None, f" {TIMES} ") == f"2 {TIMES} 2 {TIMES} 3"
    assert factored(f"2^2 {TIMES} 3", None, " * ") == "2^2 * 3"  # a product's sign asked: its powers kept
    for other in ("945", "[1, 2]", "['a', 'b']", "{'a': 1}", "Paris", "[2.5, 3]"):
        assert factored(other, "^", " * ") is None


@pytest.mark.parametrize(
    ("question", "exponents"),
    [
        ("Decompose 945 into prime factors. Write it with exponents, like 2^2 * 3.", "^"),
        ("Factor 360 (e.g. 2**3 * 5).", "**"),
        ("Give the prime factorization of 360 in exponent form.", "^"),
        (f"Write 126 as a product of primes, like 2 {TIMES} 2 {TIMES} 5.", ""),  # shown one by one
        ("Factor 60 in the form a * b * c.", ""),
        ("What is the prime factorization of 360?", None),
        ("What is 2^10?", None),  # no factors asked about
    ],
)
def test_how_a_question_asks_repeated_factors(question: str, exponents: str | None) -> None:
    assert parse_form(question).exponents == exponents


@pytest.mark.parametrize(
    ("question", "value", "written"),
    [
        ("Differentiate x^3 + 2x with respect to x.", "3*x**2 + 2", "3x^2 + 2"),
        ("Expand (x + 3)(x - 5).", "x**2 - 2*x - 15", "x^2 - 2x - 15"),
        ("Factor x^2 - 5x + 6.", "(x - 3)*(x - 2)", "(x - 3)(x - 2)"),
        ("Expand (a + b)^2.", "a**2 + 2*a*b + b**2", "a^2 + 2ab + b^2"),
        ("Integrate 6x^2 with respect to x.", "2*x**3", "2x^3"),
        ("Simplify (x^2 - 9)/(x - 3).", "x + 3", "x + 3"),
        ("Simplify 2(x + 4) - 3(x - 1).", "11 - x", "11 - x"),
        ("Differentiate x^2 sin(x).", "x**2*cos(x) + 2*x*sin(x)", "x^2*cos(x) + 2x*sin(x)"),
        ("Expand (a + b)^2.", "a^2+2ab+b^2", "a^2 + 2ab + b^2"),  # a chain of thought's spacing
        ("What is the derivative of x*sin(x)?", "x*cos(x) + sin(x)", "x*cos(x) + sin(x)"),
        ("Differentiate x**3 + 2*x.", "3x^2 + 2", "3*x**2 + 2"),  # the question writes Python's
        ("Expand (x + 3)(x - 5).", "Tuesday", None),  # not an expression in x
        ("Expand (x + 3)(x - 5).", "42", None),
        ("Reverse 'abc' three times, joined by dashes.", "abc-abc-abc", None),  # no algebra in the question
    ],
)
def test_an_expression_is_written_in_the_questions_notation(question: str, value: str, written: str | None) -> None:
    algebra = algebra_notation(question)
    assert (in_notation(value, algebra) if algebra else None) == written
    if written is not None:
        assert render(value, parse_form(question)) == f"The answer is {written}."


@pytest.mark.parametrize(
    ("latex", "text"),
    [
        ("\\frac{375}{1000}", "375/1000"),
        ("\\dfrac{x+1}{2}", "(x+1)/2"),
        ("2 \\text{ hours and } 30 \\text{ minutes}", "2 hours and 30 minutes"),
        ("2^{3} \\cdot 3^{2} \\cdot 5", "2^3 · 3^2 · 5"),
        ("\\{0, 1, 4\\}", "{0, 1, 4}"),
        ("25\\%", "25%"),
        ("\\left( \\frac{\\sqrt{2}}{2} \\right)", "( sqrt(2)/2 )"),
        ("$42$", "42"),
        ("plain", "plain"),
    ],
)
def test_latex_markup_goes(latex: str, text: str) -> None:
    assert plain(latex) == text


def test_a_latex_value_is_rendered_as_plain_text() -> None:
    fraction = parse_form("What is 0.375 written as a fraction? Reply with just the fraction.")
    assert render("\\frac{375}{1000}", fraction) == "3/8"
    assert render("\\frac{3}{8}", parse_form("What is 3 divided by 8?")) == "The answer is 3/8."  # a ratio stays one


def test_a_printed_date_or_time_keeps_the_questions_shape() -> None:
    assert written_times("A movie starts at 19:50.") == "minutes"
    assert written_times("It starts at 10:05:30.") == "seconds"
    assert written_times("What date is 100 days after 2024-01-15?") is None
    assert as_written("2024-04-24 00:00:00", None) == "2024-04-24"
    assert as_written("2024-04-24 00:00:00", "minutes") == "2024-04-24 00:00:00"  # a time of day is asked about
    assert as_written("22:25:00", "minutes") == "22:25"
    assert as_written("22:25:00", "seconds") == "22:25:00"
    movie = parse_form("A movie starts at 19:50 and lasts 2 hours 35 minutes. When does it end?")
    assert render("22:25:00", movie) == "The answer is 22:25."
    dated = parse_form("What date is 6 weeks after 12/28/2023? Answer as DD/MM/YYYY.")
    assert render("2024-02-08 00:00:00", dated) == "08/02/2024"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("78.85%", "78.85%"),
        ("\\frac{375}{1000}", "\\frac{375}{1000}"),
        ("(a + b)^2 = a^2 + 2ab + b^2", "a^2 + 2ab + b^2"),
        ("i^3 + 2i = -1 + 2i", "-1 + 2i"),
        ("'Hello World' with every vowel removed is \"Hll Wrld\".", "Hll Wrld"),
        ("221 = 13 * 17, so 221 is not a prime number.", None),  # prose, not a value
        ("There are 24 hours in a day.", None),
        ("First line.\nThen 42.", None),
    ],
)
def test_a_short_reply_is_read_whole(text: str, value: str | None) -> None:
    assert stated_value(text) == value


def test_a_yes_no_reply_is_read_from_its_first_word() -> None:
    assert stated_value("False. The interior angles add up to 540.", yes_no=True) == "False"
    assert stated_value("yes, it is.", yes_no=True) == "Yes"
    assert stated_value("Notably, it is.", yes_no=True) is None


def test_a_true_or_false_question_keeps_true_and_false() -> None:
    question = (Message("user", "True or false: 2^10 is greater than 10^3."),)
    program = Choice("```python\nprint(2**10 > 10**3)\n```\n\nOutput: True", "n1", answer="True")
    assert present(program, question, Shape(), streamed=False).content == "The answer is True."
    stated = Choice("Yes.", "n1")
    assert present(stated, question, Shape(), streamed=False).content == "The answer is True."
    yes_no = (Message("user", "Is 2^10 greater than 10^3?"),)
    assert present(program, yes_no, Shape(), streamed=False).content == "The answer is Yes."


@pytest.mark.parametrize(
    ("question", "value", "content"),
    [
        ("What is the set of remainders of the squares of 1 to 5 mod 5?", "1, 4, 4, 1, 0", "The answer is {0, 1, 4}."),
        ("What is the set of remainders of the squares of 1 to 4 mod 5?", "{1, 4, 4, 1}", "The answer is {1, 4}."),
        ("Which numbers below 10 divide 36? Answer with the set only.", "[1, 2, 3, 4, 6, 9]", "{1, 2, 3, 4, 6, 9}"),
        ("Write the set of vowels in 'banana' in curly braces.", "['a', 'a', 'a']", "The answer is {a}."),
        ("What is the set of odd primes below 10, separated by commas?", "{3, 5, 7}", "The answer is 3, 5, 7."),
        ("What is {1, 2} united with {2, 3}?", "{1, 2, 3}", "The answer is {1, 2, 3}."),
        ("Set x to 5 and add 3. What are x and x + 1?", "[8, 9]", "The answer is 8, 9."),
    ],
)
def test_a_set_asked_for_is_written_as_a_set(question: str, value: str, content: str) -> None:
    assert render(value, parse_form(question)) == content


@pytest.mark.parametrize(
    ("value", "content"),
    [('"programming"', "programming"), ("'Hll Wrld'", "Hll Wrld"), ("\u201cJupiter\u201d", "Jupiter"),
     ("it's", "it's"), ("'a' and 'b'", "'a' and 'b'")],
)  # fmt: skip
def test_quotes_around_a_whole_value_are_the_models_not_the_values(value: str, content: str) -> None:
    assert render(value, parse_form("Which word is it? One word answer.")) == content


@pytest.mark.parametrize(
    ("question", "value", "content"),
    [
        ("Which elements are in A = {2, 4, 6, 8} but not in B = {4, 8, 12}?", "2, 6", "The answer is {2, 6}."),
        ("What is the intersection of {1, 2, 3, 4, 5} and {4, 5, 6, 7}?", "[4, 5]", "The answer is {4, 5}."),
        ("How many elements does {1, 2, 3} have?", "3", "The answer is 3."),
        ("Is it true that 3^4 < 4^3? Answer TRUE or FALSE.", "False", "FALSE"),
        ("Is 7 prime? Answer Yes or No.", "True", "Yes"),
        ("A car goes 60 km/h for 2.5 hours. How far does it travel?", "150", "The answer is 150 km."),
        ("A train runs at 55 miles per hour for 3 hours. How far does it go?", "165", "The answer is 165 miles."),
        ("How far apart are 3 and 7 on the number line?", "4", "The answer is 4."),
        ("A car goes 60 km/h for 2 hours, then 30 mi. How far did it go?", "150", "The answer is 150."),
    ],
)
def test_forms_the_question_shows_without_asking(question: str, value: str, content: str) -> None:
    """Sets written in braces, choices written in capitals, a distance at a speed in one unit."""
    assert render(value, parse_form(question)) == content


def test_a_true_slash_false_statement_is_answered_true_or_false_in_the_asked_template() -> None:
    question = (Message("user", "True/false: 144 is divisible by both 8 and 9. Put your answer in \\boxed{}."),)
    assert present(Choice("\\boxed{true}", "n1"), question, Shape(), streamed=False).content == "\\boxed{True}"
