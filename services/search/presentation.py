"""What the reply shows, and what goes to the reasoning channel, for every strategy.

A strategy's chosen text is its evidence: a chain of thought, or a program with what it
printed and the votes. The user asked a question, possibly in a form ("reply with the
number", "End with 'Answer: …'"). So where the question asks for a value, the reply's
content is that value rendered in the asked form (:mod:`services.common.answer_form`), and
the evidence is the reasoning (``SearchResult.reasoning``: ``reasoning_content`` at the
gateway, counted as reasoning tokens). Where it does not (a poem, an explanation, code), the
text is the content and there is no separate reasoning. A chain of thought's value is the one it
states ("the answer is", a box), else what a one-line reply states whole (an equation's last side,
a bare value: :mod:`services.common.answer_reading`), else, for a quantity, its last number. A
chain of thought that boxes its answer asks for a value even where no rule read the question as
one (not streamed: a streamed answer is already the content). A
program's ``True`` answers a yes/no question "Yes" and a true-or-false one "True".

The hard limits are the request's own: tool calls, a response format (the JSON *is* the
answer) and token logprobs (they belong to the generated text) keep the text as it is, and
so does an answer whose tokens were already streamed as content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from services.common.answer_form import parse_form, render, strip_form
from services.common.answer_reading import stated_value
from services.common.answer_shapes import in_choice
from services.common.answers import extract_answer, extract_boxed, stated_answer, yes_or_no
from services.common.task_type import VALUE_TASKS, asks_quantity, asks_yes_or_no, classify_task
from services.search.interfaces import Message, Shape
from services.search.strategies.results import Choice
from services.search.strategies.text import question_text

# Strategies whose chosen text is a rendered program: their reply is always the value.
VALUE_STRATEGIES = frozenset({"program_of_thought"})
# A token estimate for rendered text the engine never generated as such (digits and symbols
# are one token each in the packaged models' vocabularies, words about one).
_PIECE = re.compile(r"\d|[^\W\d_]+|[^\w\s]")
# A question answered true or false (not yes or no): a program's True stays "True".
_TRUE_OR_FALSE = re.compile(r"\btrue\s*(?:or|/)\s*false\b", re.IGNORECASE)
# A question that asks for the reasoning itself: its reply is the text, whatever value it holds.
_EXPLANATION = re.compile(
    r"\b(?:explain|why|justify|describe|show\s+(?:your|the)\s+(?:work|steps|reasoning))\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Presented:
    content: str
    reasoning: str  # the choice's evidence, if any, when the content is the text itself
    answer_tokens: int


def keeps_text(shape: Shape, problem: tuple[Message, ...] = ()) -> bool:
    """Whether the request's features forbid rendering: tools, a response format, logprobs, or
    a conversation with tool turns (an agent's reply reports a tool's result in its own words)."""
    in_tool_conversation = any(m.role == "tool" or m.tool_calls for m in problem)
    return bool(shape.tools or shape.constraint is not None or shape.logprobs or in_tool_conversation)


def may_render(strategy: str, problem: tuple[Message, ...], shape: Shape) -> bool:
    """Whether the reply may be a rendered value (decided before the search, so that such a
    job does not stream its chain of thought token by token as the answer)."""
    if keeps_text(shape, problem):
        return False
    question = question_text(problem)
    if strategy in VALUE_STRATEGIES or classify_task(question) in VALUE_TASKS:
        return True
    return asks_closed_value(question)


def asks_closed_value(question: str) -> bool:
    """Whether ``question`` asks for a value by its own words, whatever task it is: a form asked
    for, or (a question that is not code and asks for no explanation) a true-or-false statement,
    a set or a factorization. Its chain of thought is then evidence and its value the reply
    ("True or false? 91 is prime." is answered "The answer is False.", not by the chain).
    Neither a list separator ("Count from 1 to 25, separated by commas.") nor an expression in
    the question ("Explain how to expand (a+b)^2.") is such a word: those replies are the text."""
    form = parse_form(question)
    if form.asked:
        return True
    if _EXPLANATION.search(question) or classify_task(question) == "code":
        return False
    return bool(form.notation.sets or form.notation.factors or _TRUE_OR_FALSE.search(question))


def estimate_tokens(text: str) -> int:
    return len(_PIECE.findall(text))


def present(choice: Choice, problem: tuple[Message, ...], shape: Shape, *, streamed: bool) -> Presented:
    """The reply's content and reasoning for ``choice`` (see the module docstring)."""
    keep = Presented(choice.text, choice.evidence, choice.answer_tokens)
    if streamed or choice.tool_calls or keeps_text(shape, problem):
        return keep
    question = question_text(problem)
    form = parse_form(question)
    value = choice.answer
    yes_no = asks_yes_or_no(question)
    # A value read out of text cut at max_tokens may itself be cut ("555" of "5555"): keep the text.
    # A question no rule reads as asking for a value still does when the model boxed its answer.
    asks_value = (
        classify_task(question) in VALUE_TASKS or asks_closed_value(question) or extract_boxed(choice.text) is not None
    )
    if not value and choice.finish_reason != "length" and asks_value:
        # a value stated in a short reply before any last number; only a quantity's chain of
        # thought answers with its last number, others (a set, a list, factors) must state it
        several = form.notation.sets or form.notation.factors
        read = extract_answer if asks_quantity(strip_form(question, form)) and not several else stated_answer
        value = stated_answer(choice.text) or stated_value(choice.text, yes_no=yes_no) or read(choice.text) or ""
    if not value:
        return keep
    if yes_no:
        value = in_choice(value, ("True", "False")) if _TRUE_OR_FALSE.search(question) else yes_or_no(value)
    content = render(value, form)
    reasoning = choice.text
    if choice.votes > 1 and not choice.answer:
        reasoning += f"\n\n({choice.votes} candidates agreed on this answer.)"
    return Presented(content, reasoning, estimate_tokens(content))
