"""Data adapters: deterministic, levelled, checkable, and splits that never mix."""

from __future__ import annotations

import pytest

from evaluation.problems.checkers import check_math, program_for
from evaluation.problems.datasets import (
    DEVELOPMENT_KEY,
    UnknownDataset,
    assert_disjoint,
    content_id,
    load_mix,
    load_problems,
    split_key,
    split_name,
    split_of,
)


@pytest.mark.parametrize("name", ["chain_sum", "basic_arithmetic", "gsm_symbolic", "products", "leg_counting"])
def test_reasoning_gym_levels_are_deterministic_and_checkable(name: str) -> None:
    first = load_problems(name, 3, seed=7)
    again = load_problems(name, 3, seed=7)
    assert [p.id for p in first] == [p.id for p in again]
    assert sorted({p.level for p in first}) == [1, 2, 3]
    for problem in first:
        # The generator's own answer, stated the way a model would, is judged correct …
        assert check_math(problem, f"Step 1: work.\nThe answer is \\boxed{{{problem.reference}}}").correct
        # … and an off-by-one answer is not.
        assert not check_math(problem, f"\\boxed{{{problem.reference}1}}").correct


def test_splits_are_disjoint_and_stable() -> None:
    cal = load_problems("chain_sum", 20, split="calibration")
    development = load_problems("chain_sum", 20, split=DEVELOPMENT_KEY)
    assert_disjoint(cal, development)
    assert all(split_of(p.id) == "calibration" for p in cal)
    assert all(split_of(p.id) == DEVELOPMENT_KEY for p in development)
    assert len(cal) == len(development) == 60


def test_users_name_the_development_split_and_the_store_keeps_its_old_key() -> None:
    assert split_key("development") == DEVELOPMENT_KEY == "heldout"  # committed pool chunks: heldout-NNNNN.jsonl
    assert [split_key(s) for s in ("calibration", "all")] == ["calibration", "all"]
    names = [split_name(k) for k in ("calibration", DEVELOPMENT_KEY, "sealed")]
    assert names == ["calibration", "development", "sealed"]
    with pytest.raises(ValueError, match="development"):
        split_key("heldout")  # not a name a user types: every flag and report says development


def test_assert_disjoint_catches_a_leak() -> None:
    cal = load_problems("chain_sum", 2, split="calibration")
    with pytest.raises(AssertionError, match="overlap"):
        assert_disjoint(cal, cal[:1])


def test_split_is_roughly_the_requested_fraction() -> None:
    ids = [content_id("x", 1, str(i)) for i in range(4000)]
    share = sum(split_of(i, 0.3) == "calibration" for i in ids) / len(ids)
    assert 0.27 < share < 0.33


def test_unknown_dataset_names_the_known_ones() -> None:
    with pytest.raises(UnknownDataset, match="chain_sum"):
        load_problems("gsm9k", 1)


def test_bad_levels_and_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="levels"):
        load_problems("chain_sum", 1, levels=[4])
    with pytest.raises(ValueError, match="per_level"):
        load_problems("chain_sum", 0)


def test_champ_and_humaneval_load_with_levels() -> None:
    champ = load_problems("champ", 2)
    assert {p.level for p in champ} == {1, 2, 3}
    assert check_math(champ[0], f"so the answer is {champ[0].reference}").correct
    code = load_problems("humaneval", 1)
    assert {p.check for p in code} == {"code"}
    assert all("entry_point" in p.extra and "check(" in p.extra["test"] for p in code)


def test_program_for_prepends_the_prompt_when_only_a_body_is_given() -> None:
    problem = load_problems("humaneval", 1, levels=[1])[0]
    body = "```python\n    return 0\n```"
    assert program_for(problem, body).startswith(problem.extra["prompt"])
    full = f"```python\ndef {problem.extra['entry_point']}(*a):\n    return 0\n```"
    assert program_for(problem, full).endswith("return 0")


def test_mix_interleaves_datasets() -> None:
    mixed = load_mix(["chain_sum", "products"], 1)
    assert [p.dataset for p in mixed[:2]] == ["chain_sum", "products"]
    assert len(mixed) == 6
