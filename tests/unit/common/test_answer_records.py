"""Real outputs through the vote and the renderer: what the programs of the answer-form prompt
set's first end-to-end run printed (docs/data/answer_forms/tested-20261207T052346Z.json, each
record's ``Output:`` line) and what its chains of thought stated, rendered again now.

Every printed value that was right comes back exactly in the asked form (the prompt's
``expected_content``): a fraction the program printed as a float (``0.5833333333333333`` for
"1/3 + 1/4") as ``7/12``, a percentage with its ``%``, a list of factors with the exponents the
example shows, an area with its unit. Complex numbers and sympy's factorizations, which no
program of that run printed, are printed here by Python and sympy themselves.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from services.common.answers import program_answer, requested_decimals, vote_key
from services.search.interfaces import Message, Shape
from services.search.presentation import present
from services.search.run import run_search
from services.search.strategies.results import Choice
from tests.helpers.answer_form_judge import judge
from tests.helpers.search_fakes import ScriptedExecutor, ScriptedPolicy, ScriptedVerifier, programs_by_seed
from tests.helpers.search_jobs import make_job

ROOT = Path(__file__).parents[3]
RUN = json.loads((ROOT / "docs/data/answer_forms/tested-20261207T052346Z.json").read_text())
ENTRIES = {e["id"]: e for e in json.loads((ROOT / "tests/data/answer_forms/prompts.json").read_text())["prompts"]}
_OUTPUT = re.compile(r"\nOutput: (?P<out>.*?)\n\nVote:", re.DOTALL)


def _printed(record: dict[str, Any]) -> str | None:
    found = _OUTPUT.search(record["reasoning_content"])
    return found.group("out") if found else None


# The run's program outputs whose value is right, judged strictly (tests/helpers/answer_form_judge.py).
RIGHT_OUTPUTS = [
    (record["id"], _printed(record) or "")
    for record in RUN["records"]
    if _printed(record) and judge(ENTRIES[record["id"]], record["content"], record["reasoning_content"])[0]
]


def printed(*values: object) -> str:
    """What ``print(*values)`` writes: a program's real output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(*values)
    return out.getvalue().strip()


async def vote(question: str, outputs: list[str]) -> tuple[str, list[str]]:
    """Programs printing ``outputs`` vote (program_of_thought, its keys and shown spelling): the
    reply's content and the vote keys."""
    job = make_job("program_of_thought", n=len(outputs), params={"early_stop": False}, max_tokens=64)
    job.messages[0].content = question
    policy = ScriptedPolicy(programs_by_seed(outputs, in_order=True))
    result, trace = await run_search(job, policy, ScriptedVerifier(lambda text: 0.0), executor=ScriptedExecutor())
    return result.answer, [n.execution.answer for n in trace.nodes if n.HasField("execution")]


def test_the_run_still_has_its_right_outputs() -> None:
    ids = {ident for ident, _ in RIGHT_OUTPUTS}
    assert {"frac-sum", "frac-mul", "frac-of", "pct-of", "pct-just", "fac-945", "fac-500", "qty-area"} <= ids


@pytest.mark.parametrize(("ident", "output"), RIGHT_OUTPUTS, ids=[ident for ident, _ in RIGHT_OUTPUTS])
async def test_a_right_printed_value_is_shown_in_the_asked_form_after_the_vote(ident: str, output: str) -> None:
    entry = ENTRIES[ident]
    content, keys = await vote(entry["prompt"], [output, output])
    assert keys[0] == keys[1] == vote_key(program_answer(output) or "", decimals=requested_decimals(entry["prompt"]))
    assert content == entry["expected_content"]


@pytest.mark.parametrize(
    ("ident", "stated", "content"),
    [
        ("frac-decimal", "\\frac{375}{1000}", "3/8"),  # LaTeX, and reduced as asked; its last number was 1000
        ("expr-square", "(a + b)^2 = a^2 + 2ab + b^2", "a^2 + 2ab + b^2"),  # the equation's last side, not "2"
        ("cx-form-only", "(1-3i)^2 = 1^2 - 2 \\cdot 1 \\cdot 3i + 3^2 = 1 - 6i + 9 = 10 - 6i", "10-6i"),
        ("pct-growth", "78.85%", "78.85%"),  # the percent sign a one-line reply states stays
        ("time-seconds", "\\boxed{2 \\text{ hours and } 30 \\text{ minutes}}", "The answer is 2 hours and 30 minutes."),
    ],
)
def test_a_short_chain_of_thought_is_read_whole_and_rendered(ident: str, stated: str, content: str) -> None:
    record = next(r for r in RUN["records"] if r["id"] == ident)
    assert stated in record["reasoning_content"]
    shown = present(Choice(record["reasoning_content"], "n1"), (Message("user", record["prompt"]),), Shape(),
                    streamed=False)  # fmt: skip
    assert shown.content == content


FACTORS_945 = "Decompose 945 into prime factors. Write it with exponents, like 2^2 * 3."
TIMES = "\u00d7"


async def test_a_factorization_keeps_its_factors_in_every_printed_shape() -> None:
    import sympy

    as_list, as_dict = "[3, 3, 3, 5, 7]", printed(sympy.factorint(945))
    assert as_dict == "{3: 3, 5: 1, 7: 1}"
    for outputs in ([as_list, as_list], [as_dict, as_dict], [printed("3**3 * 5 * 7")] * 2):
        content, _ = await vote(FACTORS_945, outputs)
        assert content == "3^3 * 5 * 7"
    content, _ = await vote(f"Write 945 as a product of primes, like 2 {TIMES} 2 {TIMES} 5.", [as_dict] * 2)
    assert content == f"The answer is 3 {TIMES} 3 {TIMES} 3 {TIMES} 5 {TIMES} 7."  # shown one by one
    content, _ = await vote("Factorize 945. Write it with exponents, like 2**2 * 3.", [as_list] * 2)
    assert content == "3**3 * 5 * 7"
    content, _ = await vote("What is the prime factorization of 945?", [as_dict] * 2)
    assert content == "The answer is 3^3 * 5 * 7."  # a dict is no one's way to write it
    content, _ = await vote("What are the prime factors of 945? Separate them with commas.", [as_dict] * 2)
    assert content == "The answer is 3, 3, 3, 5, 7."
    content, _ = await vote("What are the prime factors of 945?", [as_list] * 2)
    assert content == "The answer is 3, 3, 3, 5, 7."  # nothing asked: the list as printed


async def test_a_complex_number_is_written_as_the_question_writes_its_own() -> None:
    import sympy

    python, symbolic = printed((1 + 2j) ** 2), printed((1 + 2 * sympy.I) ** 2)
    assert (python, symbolic) == ("(-3+4j)", "(1 + 2*I)**2")
    assert printed(sympy.expand((1 + 2 * sympy.I) ** 2)) == "-3 + 4*I"
    for output in (python, "-3 + 4*I"):
        content, _ = await vote("Compute (1+2i)^2.", [output, output])
        assert content == "The answer is -3+4i."
    conjugate = printed(((7 - 2j) * 1j).conjugate())
    content, _ = await vote("What is the complex conjugate of (7-2i) times i?", [conjugate] * 2)
    assert content == "The answer is 2-7i."
    content, _ = await vote("What is i^3 + 2i? Box your answer.", [printed(1j**3 + 2j)] * 2)
    assert content == "\\boxed{i}"
    content, _ = await vote("What is the square of 1-3i? Answer in a + bi form only.", [printed((1 - 3j) ** 2)] * 2)
    assert content == "-8-6i"
    content, _ = await vote("What is (2+3j) times 3j?", [printed((2 + 3j) * 3j)] * 2)
    assert content == "The answer is (-9+6j)."  # written with j: as Python printed it


async def test_a_fraction_printed_as_a_float_or_a_fraction_votes_once_and_shows_the_fraction() -> None:
    from fractions import Fraction

    as_float, as_fraction = printed(1 / 3 + 1 / 4), printed(Fraction(1, 3) + Fraction(1, 4))
    assert (as_float, as_fraction) == ("0.5833333333333333", "7/12")
    content, keys = await vote("What is 1/3 + 1/4?", [as_float, as_fraction, as_float])
    assert len(set(keys)) == 1
    assert content == "The answer is 7/12."
    content, _ = await vote("What is 1 divided by 3, plus 1 divided by 4?", [as_float, as_float])
    assert content == "The answer is 0.5833333333333333."  # no fraction written or asked: as printed


async def test_an_expression_sympy_printed_is_written_in_the_questions_notation() -> None:
    import sympy

    x = sympy.symbols("x")
    derivative, product = printed(sympy.diff(x**3 + 2 * x, x)), printed(sympy.diff(x * sympy.sin(x), x))
    assert (derivative, product) == ("3*x**2 + 2", "x*cos(x) + sin(x)")
    content, _ = await vote("Differentiate x^3 + 2x with respect to x.", [derivative] * 2)
    assert content == "The answer is 3x^2 + 2."
    content, _ = await vote("Differentiate x**3 + 2*x with respect to x.", [derivative] * 2)
    assert content == "The answer is 3*x**2 + 2."
    factored = printed(sympy.factor(x**2 - 5 * x + 6))
    content, _ = await vote("Factor x^2 - 5x + 6. Just give the factored expression.", [factored] * 2)
    assert content == "(x - 3)(x - 2)"
    content, _ = await vote("What is the derivative of x*sin(x)?", [product] * 2)
    assert content == "The answer is x*cos(x) + sin(x)."
