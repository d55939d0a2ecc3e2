"""The program checks on the packaged model's real completions (tests/unit/data/program_outputs.json,
captured by scripts/capture_program_outputs.py, labelled by hand): literal-printing programs
abstain, computing programs vote, and the stripped prompt stops the model copying the form."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.search.strategies.program import program_source
from services.search.strategies.program_checks import computes_nothing, guessed_output, prints_literal

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
    # The reply: "What is 6 times 7? Reply with the number." written as print(32).
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
