"""PRM step splitting and aggregation (pure)."""

from __future__ import annotations

import math

import pytest

from services.verifier.prm import aggregate, chunk, plan_pairs, split_steps
from services.verifier.types import Aggregation


def test_step_markers_split_even_without_blank_lines() -> None:
    text = "Step 1: add 2 and 3.\nStep 2: 5 times 4 is 20.\nStep 3: the answer is 20."
    assert split_steps(text, 10) == ["Step 1: add 2 and 3.", "Step 2: 5 times 4 is 20.", "Step 3: the answer is 20."]


def test_text_before_the_first_marker_joins_the_first_step() -> None:
    text = "Let me think.\nStep 1: x = 2\nStep 2: y = 3"
    assert split_steps(text, 10) == ["Let me think.\nStep 1: x = 2", "Step 2: y = 3"]


def test_markdown_and_case_variants_of_markers() -> None:
    text = "**Step 1.** first\n## step 2) second"
    assert split_steps(text, 10) == ["**Step 1.** first", "## step 2) second"]


def test_blank_lines_split_when_no_markers() -> None:
    text = "First we add.\n\n  \nThen we multiply.\n\nSo the answer is 6."
    assert split_steps(text, 10) == ["First we add.", "Then we multiply.", "So the answer is 6."]


def test_single_newlines_do_not_split() -> None:
    assert split_steps("a\nb\nc", 10) == ["a\nb\nc"]


def test_blank_lines_inside_a_code_fence_do_not_split() -> None:
    text = "Write the code.\n\n```python\ndef f():\n\n    return 1\n```\n\nDone."
    assert split_steps(text, 10) == ["Write the code.", "```python\ndef f():\n\n    return 1\n```", "Done."]


def test_too_many_steps_merge_into_the_last() -> None:
    text = "\n\n".join(f"s{i}" for i in range(6))
    assert split_steps(text, 3) == ["s0", "s1", "s2\n\ns3\n\ns4\n\ns5"]


def test_empty_text_has_no_steps() -> None:
    assert split_steps("   \n\n ", 5) == []


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        (Aggregation.MIN, 0.2),
        (Aggregation.PRODUCT, 0.9 * 0.2 * 0.5),
        (Aggregation.MEAN, (0.9 + 0.2 + 0.5) / 3),
        (Aggregation.LAST, 0.5),
    ],
)
def test_aggregations(how: Aggregation, expected: float) -> None:
    assert aggregate([0.9, 0.2, 0.5], how) == pytest.approx(expected)


def test_min_and_product_punish_the_weak_step_that_mean_hides() -> None:
    scores = [0.99, 0.99, 0.05, 0.99]
    assert aggregate(scores, Aggregation.MEAN) > 0.7
    assert aggregate(scores, Aggregation.MIN) == pytest.approx(0.05)
    assert aggregate(scores, Aggregation.PRODUCT) < 0.05


def test_degenerate_step_scores_are_cleaned() -> None:
    assert aggregate([math.nan, 0.8], Aggregation.MIN) == 0.0
    assert aggregate([1.7, -0.3], Aggregation.MEAN) == pytest.approx(0.5)
    assert aggregate([], Aggregation.MEAN) == 0.0


def test_pairs_cover_every_prefix_and_chunks_never_split_a_pair() -> None:
    pairs = plan_pairs([["a", "b", "c"], ["x"]], "Q?", " Yes", " No")
    assert [(p.candidate, p.step) for p in pairs] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert pairs[1].yes == "a\n\nb\n\nQ? Yes" and pairs[1].no == "a\n\nb\n\nQ? No"
    batches = chunk(pairs, 5)
    assert [len(b) for b in batches] == [2, 2]
    assert sum(len(b) for b in chunk(pairs, 128)) == 4 and len(chunk(pairs, 128)) == 1
