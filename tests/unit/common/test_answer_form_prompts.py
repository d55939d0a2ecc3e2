"""The tested half of tests/data/answer_forms/prompts.json: questions as users type them, over
many kinds of answer, half with a form instruction in a phrasing of their own.

For each, the reply rendered from the correct value is exactly the expected content, and what a
program is asked keeps the whole question and none of the instruction's words (save rounding and
units, which change the number to compute and stay). The kept-apart half is not read here: it is
judged end to end, once, by prompts no rule was tuned on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.common.answer_form import parse_form, render, strip_form

DATA = json.loads((Path(__file__).parents[2] / "data/answer_forms/prompts.json").read_text())
PROMPTS: list[dict[str, Any]] = DATA["prompts"]
TESTED = [entry for entry in PROMPTS if entry["half"] == "tested"]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


@pytest.mark.parametrize("entry", TESTED, ids=[entry["id"] for entry in TESTED])
def test_the_correct_value_is_rendered_in_the_asked_form(entry: dict[str, Any]) -> None:
    assert render(entry["expected"], parse_form(entry["prompt"])) == entry["expected_content"]


@pytest.mark.parametrize("entry", TESTED, ids=[entry["id"] for entry in TESTED])
def test_the_program_is_asked_the_question_without_the_instruction(entry: dict[str, Any]) -> None:
    stripped = strip_form(entry["prompt"])
    if entry["instruction"] is None:
        assert stripped == entry["prompt"]
        return
    if entry["instruction_stays"]:
        assert stripped == entry["prompt"]
        return
    assert _words(entry["question"]) <= _words(stripped)  # nothing of the task is lost
    left = (_words(entry["instruction"]) - _words(entry["question"])) & _words(stripped)
    assert not left, stripped


def test_the_set_is_split_in_halves_by_its_stated_rule() -> None:
    groups: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    for entry in PROMPTS:
        groups.setdefault((entry["kind"], entry["instruction"] is not None), []).append(entry)
    for group in groups.values():
        ordered = sorted(group, key=lambda e: hashlib.sha256(e["id"].encode()).hexdigest())
        assert [e["half"] for e in ordered] == ["tested" if i % 2 == 0 else "kept_apart" for i in range(len(group))]
    halves = Counter(entry["half"] for entry in PROMPTS)
    assert len(PROMPTS) >= 120 and halves["tested"] == halves["kept_apart"]
    kinds = {entry["kind"] for entry in PROMPTS}
    assert len(kinds) >= 15
    for half in ("tested", "kept_apart"):
        assert {e["kind"] for e in PROMPTS if e["half"] == half} == kinds
    phrasings = {entry["phrasing"] for entry in PROMPTS if entry["instruction"] is not None}
    assert len(phrasings) >= 30
    assert sum(entry["instruction"] is not None for entry in PROMPTS) * 2 == len(PROMPTS)
