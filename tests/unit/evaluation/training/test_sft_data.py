"""The fine-tuning rows as a training set: the chat template's prompt is masked and the assistant
turn (with its end-of-turn token, without the newline after it) is trained; a file with a
development or sealed problem is refused whole; the row order is seeded and stays in its epoch."""

from __future__ import annotations

import pytest

from evaluation.problems.sealed import load_sealed, sealed_hashes
from evaluation.training.formats import ChatMessage, SftRow
from evaluation.training.sft_data import IGNORE, WithheldRows, batches, refuse_withheld, tokenize, withheld_reason
from evaluation.training.withheld import Withheld
from tests.unit.evaluation.training.fixtures import problem_pool, side_id
from tests.unit.evaluation.training.tiny_model import tiny_tokenizer

SYSTEM = "Solve the problem. Think step by step, then give the final answer as \\boxed{ANSWER}."
DEVELOPMENT_Q = "Development: what is 19 + 23 when the two are added together?"


def row(question: str, answer: str = "```python\nprint(8 + 5)\n```\n\nThe answer is \\boxed{13}.", *,
        prompt_id: str = "", source: str = "pool:m") -> SftRow:  # fmt: skip
    messages = [ChatMessage(role="system", content=SYSTEM), ChatMessage(role="user", content=question),
                ChatMessage(role="assistant", content=answer)]  # fmt: skip
    return SftRow(messages=messages, prompt_id=prompt_id or side_id("calibration", "t"), candidate_id="c",
                  source=source, family="chain_sum", task_kind="arithmetic", modality="program",
                  completion_tokens=9)  # fmt: skip


def withheld() -> Withheld:
    sealed = load_sealed()
    development = [problem_pool(DEVELOPMENT_Q, "42", split="heldout")]
    return Withheld.build(development, sealed_hashes(), (p.question for p in sealed))


def test_only_the_assistant_turn_and_its_end_of_turn_token_are_trained() -> None:
    tokenizer = tiny_tokenizer()
    example = tokenize(row("What is 8 + 5?", answer="A: 5"), tokenizer)
    trained = [t for t, label in zip(example.input_ids, example.labels, strict=True) if label != IGNORE]
    assert tokenizer.decode(trained) == "A: 5<|im_end|>"
    assert example.trained_tokens == len("A: 5") + 1
    assert example.labels[-1] == IGNORE  # the template's newline after <|im_end|> is never generated
    prompt = tokenizer.apply_chat_template([m.model_dump() for m in row("What is 8 + 5?").messages[:-1]],
                                           tokenize=False, add_generation_prompt=True)  # fmt: skip
    first = example.labels.index(next(label for label in example.labels if label != IGNORE))
    assert tokenizer.decode(example.input_ids[:first]) == prompt  # exactly what inference is sent


def test_labels_equal_the_ids_where_trained() -> None:
    example = tokenize(row("What is 2 + 2?"), tiny_tokenizer())
    assert len(example.labels) == len(example.input_ids)
    assert all(label in (IGNORE, t) for t, label in zip(example.input_ids, example.labels, strict=True))


def test_a_row_must_end_with_the_assistant() -> None:
    bad = row("What is 2 + 2?").model_copy(update={"messages": row("What is 2 + 2?").messages[:2]})
    with pytest.raises(ValueError, match="assistant"):
        tokenize(bad, tiny_tokenizer())


def test_a_file_with_a_development_or_sealed_problem_is_refused_whole() -> None:
    sealed = load_sealed()[0].question
    rows = [row("What is 8 + 5?"), row(DEVELOPMENT_Q), row(sealed)]
    assert [withheld_reason(r, withheld()) for r in rows] == [None, "development_split", "sealed_split"]
    with pytest.raises(WithheldRows, match="2 row"):
        refuse_withheld(rows, withheld())
    refuse_withheld(rows[:1], withheld())


def test_a_pool_row_on_the_held_out_side_of_the_split_is_refused_whatever_its_text() -> None:
    heldout = row("A question nobody has seen before?", prompt_id=side_id("heldout", "h"))
    assert withheld_reason(heldout, withheld()) == "development_split"
    served = row("A question nobody has seen before?", prompt_id="served/abc", source="served:alice")
    assert withheld_reason(served, withheld()) is None  # a served prompt is checked by content alone


def test_the_order_is_seeded_and_batches_stay_in_their_epoch() -> None:
    steps = batches(10, 2, seed=3, size=4)
    assert steps == batches(10, 2, seed=3, size=4) and steps != batches(10, 2, seed=4, size=4)
    assert [len(s) for s in steps] == [4, 4, 2, 4, 4, 2]
    first, second = [i for s in steps[:3] for i in s], [i for s in steps[3:] for i in s]
    assert sorted(first) == sorted(second) == list(range(10)) and first != second
