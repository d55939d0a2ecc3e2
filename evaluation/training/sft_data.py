"""The fine-tuning rows as a training set: read, refused if any row is withheld, tokenized with
the model's chat template with the loss on the assistant turn only, and put in a seeded order.

- **Refusal, not filtering.** A row whose question is a development or sealed problem (the
  export's own check, :class:`~evaluation.training.withheld.Withheld`, over every message but the
  answer), or a pool row whose problem id the split function puts on the development side, stops
  the run: such a row means the export or the file is wrong, and training on it would make the
  before/after evaluation measure memory.
- **Masking.** The prompt (system and user turns, and the template's ``<|im_start|>assistant``
  header) is rendered with the generation prompt, exactly as a served request is, and tokenized
  on its own; the completion (the rest of the rendered conversation) is tokenized on its own and
  appended, so the prompt's tokens are the ones inference sees. Labels are the completion's
  tokens up to the template's end-of-turn token; the whitespace the template writes after it is
  never generated and is masked with the prompt.
- **Order.** Each epoch is a seeded shuffle of the rows; batches never cross an epoch.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evaluation.problems.datasets import split_of
from evaluation.training.formats import SftRow
from evaluation.training.withheld import Withheld

#: label of a token the loss ignores (the convention of torch's cross-entropy)
IGNORE = -100


class ChatTokenizer(Protocol):
    """What is read of a Hugging Face tokenizer: its chat template and its encoder."""

    def apply_chat_template(self, conversation: Any, **kwargs: Any) -> Any: ...

    def __call__(self, text: str, **kwargs: Any) -> Any: ...

    def decode(self, ids: Sequence[int], **kwargs: Any) -> str: ...


class WithheldRows(ValueError):
    """Rows of the training file that no training may read (development or sealed problems)."""


@dataclass(frozen=True)
class Example:
    """One tokenized row: ``labels`` is ``input_ids`` with every token the loss ignores set to
    :data:`IGNORE`."""

    prompt_id: str
    input_ids: tuple[int, ...]
    labels: tuple[int, ...]

    @property
    def trained_tokens(self) -> int:
        return sum(1 for label in self.labels if label != IGNORE)


def read_rows(path: Path) -> list[SftRow]:
    """The rows of an export's ``sft.jsonl``, validated against their model."""
    return [SftRow.model_validate(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def withheld_reason(row: SftRow, withheld: Withheld) -> str | None:
    """Why ``row`` may not be trained on, or ``None``: a withheld question in its prompt, or
    (for a pool's row) a problem id on the development side of the split."""
    why = withheld.prompt_reason(m.content for m in row.messages[:-1])
    if why is None and row.source.startswith("pool:") and split_of(row.prompt_id) != "calibration":
        why = "development_split"
    return why


def refuse_withheld(rows: Sequence[SftRow], withheld: Withheld) -> None:
    """Raise :class:`WithheldRows` naming every withheld row; return when there is none."""
    found = [(row.prompt_id, why) for row in rows if (why := withheld_reason(row, withheld)) is not None]
    if found:
        listed = ", ".join(f"{pid} ({why})" for pid, why in found[:10])
        raise WithheldRows(f"{len(found)} row(s) are development or sealed problems: {listed}")


def _ids(encoded: Any) -> list[int]:
    return [int(i) for i in encoded["input_ids"]]


def tokenize(row: SftRow, tokenizer: ChatTokenizer) -> Example:
    """The row as input ids and labels (module docstring: masking)."""
    messages = [m.model_dump() for m in row.messages]
    if messages[-1]["role"] != "assistant":
        raise ValueError(f"{row.prompt_id}: the last message is not the assistant's")
    prompt = str(tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True))
    full = str(tokenizer.apply_chat_template(messages, tokenize=False))
    if not full.startswith(prompt):
        raise ValueError(f"{row.prompt_id}: the chat template renders the prompt differently inside the conversation")
    prompt_ids = _ids(tokenizer(prompt, add_special_tokens=False))
    completion_ids = _ids(tokenizer(full[len(prompt) :], add_special_tokens=False))
    trained = len(completion_ids)
    while trained > 0 and not tokenizer.decode(completion_ids[trained - 1 : trained]).strip():
        trained -= 1  # the template's newline after the end-of-turn token
    labels = [IGNORE] * len(prompt_ids) + completion_ids[:trained] + [IGNORE] * (len(completion_ids) - trained)
    return Example(row.prompt_id, tuple(prompt_ids + completion_ids), tuple(labels))


def epoch_order(count: int, epochs: int, seed: int) -> list[list[int]]:
    """Per epoch, a seeded permutation of ``range(count)`` (the same for the same arguments)."""
    orders = []
    for epoch in range(epochs):
        order = list(range(count))
        random.Random(f"{seed}:{epoch}").shuffle(order)
        orders.append(order)
    return orders


def batches(count: int, epochs: int, seed: int, size: int) -> list[tuple[int, ...]]:
    """The optimizer steps in order: each a tuple of row indices, ``size`` at most, never across
    an epoch's end."""
    if size < 1:
        raise ValueError(f"batch size must be >= 1, got {size}")
    return [tuple(order[i : i + size]) for order in epoch_order(count, epochs, seed) for i in range(0, count, size)]
