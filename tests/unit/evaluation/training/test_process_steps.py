"""A chain of thought cut into steps: only after a newline, never inside a program, a formula or a
boxed answer; short fragments merged forward; the prefixes spread evenly and never the answer."""

from __future__ import annotations

from evaluation.training.process_steps import split_steps, spread, step_prefixes

CHAIN = (
    "First we read the question and the two numbers.\n"
    "\n"
    "So:\n"
    "We add the first number to the second one.\n"
    "```python\n"
    "a = 8\n"
    "\n"
    "print(a + 5)\n"
    "```\n"
    "The program prints the sum of the two numbers.\n"
    "The answer is \\boxed{\n13\n}.\n"
)


def test_the_steps_are_the_text_cut_only_after_newlines() -> None:
    steps = split_steps(CHAIN)
    assert "".join(steps) == CHAIN
    assert all(step.endswith("\n") for step in steps)
    assert steps[0] == "First we read the question and the two numbers.\n\n"  # the blank line stays with it
    assert steps[1] == "So:\nWe add the first number to the second one.\n"  # "So:" is merged into the next


def test_a_code_block_and_a_boxed_answer_are_never_split() -> None:
    steps = split_steps(CHAIN)
    assert "```python\na = 8\n\nprint(a + 5)\n```\n" in steps
    assert steps[-1] == "The answer is \\boxed{\n13\n}.\n"


def test_a_formula_and_indented_lines_stay_with_their_step() -> None:
    text = ("1. Add the first two numbers:\n   \\[\n   7 + 7 = 14\n   \\]\n\n"
            "2. Then add the last one to it:\n$$\n14 + 8\n$$\nSo \\boxed{22}.")  # fmt: skip
    steps = split_steps(text)
    assert steps == ["1. Add the first two numbers:\n   \\[\n   7 + 7 = 14\n   \\]\n\n",
                     "2. Then add the last one to it:\n$$\n14 + 8\n$$\n", "So \\boxed{22}."]  # fmt: skip


def test_an_unclosed_fence_keeps_the_rest_as_one_step() -> None:
    first = "Here is a long enough first step of reasoning.\n"
    assert split_steps(first + "```python\nprint(1)\n\nprint(2)\n") == [first, "```python\nprint(1)\n\nprint(2)\n"]


def test_spread_is_even_and_keeps_the_last() -> None:
    assert spread(3, 4) == [0, 1, 2]
    assert spread(10, 4) == [1, 4, 6, 9]
    assert spread(8, 1) == [7]
    assert spread(0, 4) == []


def test_prefixes_end_at_their_step_and_never_hold_the_whole_answer() -> None:
    lines = [f"Step number {i} of the reasoning goes here.\n" for i in range(12)]
    text = "".join(lines) + "Therefore the answer is \\boxed{7}."
    prefixes = step_prefixes(text, 4)
    assert [p.index for p in prefixes] == [2, 5, 8, 11]
    for p in prefixes:
        assert text.startswith(p.prefix) and p.prefix.endswith(p.text) and p.prefix.endswith("\n")
        assert p.end == len("".join(lines[: p.index + 1]))
    assert all(p.end < len(text) for p in prefixes)


def test_a_one_step_chain_has_no_prefix() -> None:
    assert step_prefixes("The answer is \\boxed{13}.", 4) == []
    assert len(step_prefixes("A first step that is long enough.\nSo \\boxed{13}.", 4)) == 1
