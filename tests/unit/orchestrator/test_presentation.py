"""What every strategy's reply shows: the value in the asked form, the evidence as reasoning,
and the text itself where the request forbids rendering or no value is asked for."""

from __future__ import annotations

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
