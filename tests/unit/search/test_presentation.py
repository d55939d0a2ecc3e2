"""What every strategy's reply shows: the value in the asked form, the evidence as reasoning,
and the text itself where the request forbids rendering or no value is asked for."""

from __future__ import annotations

import pytest

from services.search.interfaces import Constraint, Message, Shape
from services.search.presentation import may_render, present
from services.search.strategies.results import Choice

CHAIN = "Six sevens: 6 * 7 = 42.\n\nThe answer is 42."


def problem(text: str) -> tuple[Message, ...]:
    return (Message("user", text),)


def test_a_chain_of_thought_answer_is_rendered_and_the_chain_becomes_reasoning() -> None:
    shown = present(Choice(CHAIN, "n1", answer_tokens=20), problem("What is 6*7? Reply with the number."), Shape(),
                    streamed=False)  # fmt: skip
    assert (shown.content, shown.reasoning) == ("42", CHAIN)
    assert shown.answer_tokens == 2
    sentence = present(Choice(CHAIN, "n1"), problem("What is 6*7?"), Shape(), streamed=False)
    assert sentence.content == "The answer is 42."


def test_a_program_answer_is_its_printed_value() -> None:
    choice = Choice("```python\nprint('olleh')\n```\n\nOutput: olleh", "n1", answer="olleh")
    shown = present(choice, problem("Reverse 'hello'. Reply in uppercase."), Shape(), streamed=False)
    assert shown.content == "The answer is OLLEH." and shown.reasoning.startswith("```python")


def test_open_prompts_tools_formats_logprobs_and_streamed_text_keep_the_text() -> None:
    poem = Choice("Waves fold on the shore.", "n1", answer_tokens=6)
    assert present(poem, problem("Write a line about the sea."), Shape(), streamed=False).content == poem.text
    arithmetic = problem("What is 6*7?")
    for shape in (Shape(constraint=Constraint(json_object=True)), Shape(logprobs=True)):
        assert present(Choice(CHAIN, "n1"), arithmetic, shape, streamed=False).content == CHAIN
        assert not may_render("program_of_thought", arithmetic, shape)
    assert present(Choice(CHAIN, "n1"), arithmetic, Shape(), streamed=True).content == CHAIN
    assert may_render("single", arithmetic, Shape()) and not may_render("single", problem("Hi!"), Shape())
    assert may_render("program_of_thought", problem("Hi!"), Shape())


@pytest.mark.parametrize(
    "question",
    [
        "True or false? 91 is prime.",
        "What is the set of remainders when the squares of 1 through 10 are divided by 5?",
        "Break 84 down into its prime factors.",
    ],
)
def test_a_question_asking_for_a_value_by_its_words_is_not_streamed_as_the_answer(question: str) -> None:
    """Seen on a faster host: "True or false? 91 is prime." went to one chain of thought, which
    streamed "False" as the content instead of the value in the reply's form."""
    assert may_render("single", problem(question), Shape())
    shown = present(Choice("False", "n1"), problem("True or false? 91 is prime."), Shape(), streamed=False)
    assert shown.content == "The answer is False."


@pytest.mark.parametrize(
    "question",
    [
        "Explain in one sentence what a hash table is.",
        "Is it a good idea to learn Rust?",
        "Count from 1 to 25, separated by commas.",
        "Explain how to expand (a+b)^2.",
        "Is it true or false that Python is compiled? Explain.",
        "Write a Python function f(x) that returns x squared plus 1.",
        "Write a function that returns the set of prime factors of n.",
    ],
)
def test_an_open_question_streams_its_answer(question: str) -> None:
    assert not may_render("single", problem(question), Shape())


def test_a_code_or_explanation_reply_is_never_cut_to_a_number() -> None:
    """Seen in review: "The answer is 2." for a function written for "f(x) ... x squared"."""
    code = "```python\ndef f(x):\n    return x**2 + 1\n```\n\nThis function returns 5 for x = 2."
    asked = problem("Write a Python function f(x) that returns x squared plus 1.")
    assert present(Choice(code, "n1"), asked, Shape(), streamed=False).content == code
    explained = "Multiply (a+b)(a+b): a^2 + 2ab + b^2, each term by the distributive law, squared 2 ways."
    asked = problem("Explain how to expand (a+b)^2.")
    assert present(Choice(explained, "n1"), asked, Shape(), streamed=False).content == explained


def test_votes_are_part_of_the_evidence() -> None:
    shown = present(Choice(CHAIN, "n1", votes=3), problem("What is 6*7?"), Shape(), streamed=False)
    assert "3 candidates agreed" in shown.reasoning


def test_a_tool_conversation_and_a_cut_chain_keep_the_text() -> None:
    """Seen with the Agents SDK: after a tool result, a reply cut at max_tokens ended in
    "...5555, "b": 0}} ... 555" and was rendered "The answer is 555."; it must stay text."""
    from services.search.interfaces import ToolCall

    call = ToolCall(id="c1", name="add", arguments='{"a": 1234, "b": 4321}')
    agent = (
        Message("user", "What is 1234 + 4321? Use the add tool."),
        Message("assistant", "", tool_calls=(call,)),
        Message("tool", "5555", tool_call_id="c1", name="add"),
    )
    reply = Choice("The sum is 5555.", "n1")
    assert present(reply, agent, Shape(), streamed=False).content == reply.text
    assert not may_render("single", agent, Shape())
    cut = Choice('{"name": "add", "arguments": {"a": 5555, "b": 0}}\n{"a": 555', "n1", finish_reason="length")
    assert present(cut, problem("What is 1234 + 4321?"), Shape(), streamed=False).content == cut.text


def test_a_yes_no_or_which_question_renders_only_a_stated_answer() -> None:
    """The last number of such a chain is a step ("221 = 13 x 17" made "The answer is 17.")."""
    unstated = Choice("221 = 13 * 17, so 221 is not a prime number.", "n1")
    shown = present(unstated, problem("Is 221 a prime number?"), Shape(), streamed=False)
    assert (shown.content, shown.reasoning) == (unstated.text, "")
    which = Choice("9.9 is larger, because 0.90 > 0.11.", "n1")
    assert present(which, problem("Which is larger, 9.11 or 9.9?"), Shape(), streamed=False).content == which.text
    stated = Choice("Since 0.90 > 0.11, the answer is 9.9.", "n1")
    assert present(stated, problem("Which is larger, 9.11 or 9.9?"), Shape(), streamed=False).content == (
        "The answer is 9.9."
    )
    quantity = Choice("He has 3 + 5 = 8 apples.", "n1")  # a quantity: its last number is the answer
    story = problem("Tom has 3 apples and buys 5. How many now?")
    assert present(quantity, story, Shape(), streamed=False).content == "The answer is 8."


def test_a_programs_true_or_false_answers_a_yes_no_question_as_yes_or_no() -> None:
    program = Choice("```python\nprint(221 % 13 != 0)\n```\n\nOutput: False", "n1", answer="False")
    assert present(program, problem("Is 221 a prime number?"), Shape(), streamed=False).content == "The answer is No."
    listed = Choice("```python\nprint(1 > 2)\n```\n\nOutput: False", "n1", answer="False")
    assert present(listed, problem("What does 1 > 2 evaluate to?"), Shape(), streamed=False).content == (
        "The answer is False."
    )


def test_a_chain_that_states_no_answer_to_a_question_for_no_quantity_stays_text() -> None:
    """Seen at effort `none`: "what day of the week ..." rendered "The answer is 5." (a step)."""
    chain = Choice("12 days is 1 week and 5 days. Wednesday plus 5 days is Monday.", "n1")
    question = problem("If today is Wednesday, what day of the week will it be in 12 days?")
    assert present(chain, question, Shape(), streamed=False).content == chain.text


def test_a_boxed_chain_answers_a_question_no_rule_read_as_asking_for_a_value() -> None:
    """Seen on a host whose model boxed the remainders as a list: the whole chain was the content."""
    question = problem("What is the set of remainders when the squares of 1 through 10 are divided by 5?")
    chain = "The squares leave 1, 4, 4, 1, 0, ...\n\n\\[\n\\boxed{1, 4, 4, 1, 0, 0, 4, 0, 1}\n\\]"
    shown = present(Choice(chain, "n1"), question, Shape(), streamed=False)
    assert (shown.content, shown.reasoning) == ("The answer is {0, 1, 4}.", chain)
    assert present(Choice(chain, "n1"), question, Shape(), streamed=True).content == chain
    unboxed = Choice("Remainders repeat with period 5.", "n1")
    assert present(unboxed, question, Shape(), streamed=False).content == unboxed.text
