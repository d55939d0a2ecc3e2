"""The reply shows the winning candidate's own value, converted only as far as the question's
form asks: a printed fraction stays a fraction, a list keeps its items (with the separator the
question shows), a complex number, a time and a word keep their form. Vote keys only compare.

The printed values are what Python itself prints (:func:`printed` runs ``print``), and they go
the way a program's output goes: ``program_answer`` on its stdout, ``Choice.answer``,
``present``.
"""

from __future__ import annotations

import contextlib
import io
from fractions import Fraction

import pytest

from services.common.answers import program_answer, vote_key
from services.gen.ttc.v1 import orchestrator_pb2
from services.search.interfaces import Message, Shape
from services.search.presentation import present
from services.search.run import run_search
from services.search.strategies.results import Choice
from tests.helpers.search_fakes import ScriptedExecutor, ScriptedPolicy, ScriptedVerifier, programs_by_seed
from tests.helpers.search_jobs import make_job

TIMES = "\u00d7"  # the multiplication sign
SIMPLIFY = "Simplify the fraction 548/1040 to its lowest terms. Give only the simplified fraction"
FACTOR = f"Find the prime factorization of 261. Format your answer like: 2 {TIMES} 2 {TIMES} 5"


def printed(*values: object) -> str:
    """What ``print(*values)`` writes."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(*values)
    return out.getvalue()


def shown(stdout: str, question: str) -> str:
    """The reply's content for a program that printed ``stdout``."""
    answer = program_answer(stdout) or ""
    choice = Choice(f"```python\n...\n```\n\nOutput: {stdout.strip()}", "n1", answer=answer)
    return present(choice, (Message("user", question),), Shape(), streamed=False).content


@pytest.mark.parametrize(
    ("stdout", "question", "content"),
    [
        (printed(Fraction(137, 260)), SIMPLIFY, "137/260"),
        (printed(Fraction(137, 260)), "Simplify 548/1040. End with 'Answer: …'", "Answer: 137/260"),
        (printed(Fraction(137, 260)), "Simplify 548/1040.", "The answer is 137/260."),
        (printed(Fraction(-37, 3)), "What is -5 - 22/3? Reply with the number.", "-37/3"),
        (printed(-37 / 3), "What is -37 divided by 3? Reply with the number.", "-12.333333333333334"),
        (printed(complex(-12, 3)), "What is (-12+3j) written as a Python complex?", "The answer is (-12+3j)."),
        (printed((2 + 3j) * 3j), "What is (2+3j) times 3j?", "The answer is (-9+6j)."),
        (printed(3j), "What is the square root of -9, as Python writes it?", "The answer is 3j."),
        (printed([3, 3, 29]), FACTOR, f"3 {TIMES} 3 {TIMES} 29"),
        (
            printed([3, 3, 29]),
            f"Factor 261 into primes, in the form a {TIMES} b {TIMES} c.",
            f"The answer is 3 {TIMES} 3 {TIMES} 29.",
        ),
        (printed([3, 3, 29]), "Factor 261 into primes (e.g. 2*3*5).", "The answer is 3*3*29."),
        (printed(sorted([9, 1, 5, 3])), "Sort 9, 1, 5, 3 ascending. Reply with just the list.", "1, 3, 5, 9"),
        (printed(sorted(["pear", "apple"])), "Sort pear, apple, comma-separated.", "The answer is apple, pear."),
        (printed(f"{14:02d}:{5:02d}"), "What time is 2h20 after 11:45? Reply with just the time.", "14:05"),
        (printed("Paris"), "What is the capital of France? Answer in one word.", "Paris"),
        (printed("Paris"), "What is the capital of France? Answer in one word, lowercase.", "paris"),
        (printed(6 * 7), "What is 6 times 7? Reply with the number.", "42"),
        (printed(84 / 2), "What is 84 / 2? Reply with the number.", "42"),
        (printed(0.1 + 0.2), "What is 0.1 + 0.2? Reply with the number.", "0.3"),  # float noise only
        (printed(137 / 260), "What is 137/260 as a fraction? Reply with the number.", "137/260"),
    ],
)
def test_the_reply_shows_the_printed_value_in_the_asked_form(stdout: str, question: str, content: str) -> None:
    assert shown(stdout, question) == content


def test_a_sympy_rational_prints_and_renders_as_a_fraction() -> None:
    import sympy  # a dependency of math-verify; imported here, it is slow to import

    stdout = printed(sympy.Rational(-37, 3))
    assert stdout == "-37/3\n"
    assert shown(stdout, "What is -5 - 22/3? Reply with the number.") == "-37/3"
    assert shown(printed(sympy.Rational(548, 1040)), SIMPLIFY) == "137/260"
    assert shown(printed(sympy.Integer(42)), "What is 6 times 7? Reply with the number.") == "42"


def test_a_factorization_keeps_its_items_when_its_program_prints_a_list_or_a_product() -> None:
    assert shown(printed("3 * 3 * 29"), FACTOR) == f"3 {TIMES} 3 {TIMES} 29"
    assert shown(printed("3 x 3 x 29"), FACTOR) == f"3 {TIMES} 3 {TIMES} 29"
    assert shown(printed((3, 3, 29)), "Factor 261 into primes.") == "The answer is 3, 3, 29."


def pot_job(question: str, n: int) -> orchestrator_pb2.SearchJob:
    job = make_job("program_of_thought", n=n, params={"early_stop": False}, max_tokens=64)
    job.messages[0].content = question
    return job


async def vote(question: str, outputs: list[str]) -> tuple[str, str, list[str]]:
    """Programs printing ``outputs`` vote: the reply's content, its reasoning and the vote keys."""
    policy = ScriptedPolicy(programs_by_seed(outputs, in_order=True))
    result, trace = await run_search(
        pot_job(question, len(outputs)), policy, ScriptedVerifier(lambda text: 0.0), executor=ScriptedExecutor()
    )
    keys = [n.execution.answer for n in trace.nodes if n.HasField("execution")]
    return result.answer, result.reasoning, keys


async def test_a_fraction_and_its_decimal_vote_together_and_the_asked_form_is_shown() -> None:
    fraction, decimal = printed(Fraction(137, 260)).strip(), printed(137 / 260).strip()
    assert (fraction, decimal) == ("137/260", "0.5269230769230769")
    assert vote_key(fraction) == vote_key(decimal)  # normalization unchanged: one answer
    content, reasoning, keys = await vote(SIMPLIFY, [decimal, fraction])
    assert keys == [vote_key(decimal)] * 2
    assert content == "137/260"  # asked for a fraction: the spelling that is one
    assert reasoning.rstrip().endswith("The answer is 137/260.")  # the program shown printed it
    content, reasoning, _ = await vote("What is 137 divided by 260?", [fraction, decimal, decimal])
    assert content == "The answer is 0.5269230769230769."  # no form asked: the majority spelling
    assert reasoning.rstrip().endswith("The answer is 0.5269230769230769.")
    content, _, _ = await vote("What is 137 divided by 260?", [fraction, decimal])
    assert content == "The answer is 137/260."  # a tie: the earliest


async def test_programs_printing_one_list_vote_together_and_the_list_takes_the_asked_separator() -> None:
    content, _, keys = await vote(FACTOR, [printed([3, 3, 29]).strip()] * 2 + ["[3, 87]"])
    assert keys[0] == keys[1] != keys[2]
    assert content == f"3 {TIMES} 3 {TIMES} 29"
