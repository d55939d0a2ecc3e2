"""The export's rules on hand-built pools: best = right then fewest tokens, duplicates merged,
preferences paired within a modality, judge scores ignored, and no development or sealed problem
in any file, whichever split its pool claims."""

from __future__ import annotations

import dataclasses
from collections import Counter

from evaluation.pools.store import ProblemPool
from evaluation.problems.sealed import load_sealed, sealed_hashes, text_hash
from evaluation.training.export import DUPLICATE, Exported, export
from evaluation.training.trajectories import pool_trajectories
from evaluation.training.withheld import Withheld
from services.search.strategies.program import program_source
from tests.unit.evaluation.training.fixtures import cot, problem_pool, program, side_id

QUESTION = "What is 8 + 5? Add the two numbers."


def run(pools: list[ProblemPool], development: list[ProblemPool] | None = None) -> Exported:
    sealed = load_sealed()
    withheld = Withheld.build(development or [], sealed_hashes(), (p.question for p in sealed))
    left_out: Counter[str] = Counter()
    found = pool_trajectories([(p, "m") for p in pools], withheld, left_out)
    return export(found, left_out)


def dumped(exported: Exported) -> str:
    return "\n".join(r.model_dump_json() for r in [*exported.sft, *exported.preferences, *exported.outcomes])


def test_best_is_right_then_fewest_tokens_and_never_cut() -> None:
    pool = problem_pool(QUESTION, "13", cot=[
        cot(0, "13", True, tokens=50),
        cot(1, "13", True, tokens=5, cut=True),  # right but cut: not complete
        cot(2, "26", False, tokens=3, scores={"orm": 1.0}),  # the judge's favourite, wrong
        cot(3, "13", True, tokens=20, scores={"orm": 0.0}),
    ], program=[program(0, "print(13)", "13\n", True, tokens=2)])  # fmt: skip
    exported = run([pool])
    assert [r.candidate_id for r in exported.sft] == [f"m/{pool.id}/cot/3"]
    messages = exported.sft[0].messages
    assert [m.role for m in messages] == ["system", "user", "assistant"] and messages[1].content == QUESTION


def test_program_turn_holds_program_output_and_answer() -> None:
    pool = problem_pool(QUESTION, "13", program=[program(0, "a = 8\nprint(a + 5)", "13\n", True)])
    turn = run([pool]).sft[0].messages[-1].content
    assert turn.startswith("```python\na = 8\nprint(a + 5)\n```") and "Output:\n```text\n13\n```" in turn
    assert turn.endswith("\\boxed{13}.")
    assert program_source(turn) == "a = 8\nprint(a + 5)"  # the served reader runs the program, not its output


def test_near_duplicates_are_one_example() -> None:
    same = "Adding: the answer is \\boxed{13}."
    pool = problem_pool(QUESTION, "13", cot=[
        cot(0, "13", True, text=same), cot(1, "13", True, text="  adding:   THE answer is \\boxed{13}. "),
        cot(2, "13", True, text="Other words, \\boxed{13}."),
    ])  # fmt: skip
    exported = run([pool])
    assert len(exported.outcomes) == 2 and exported.left_out[DUPLICATE] == 1


def test_preferences_pair_within_a_modality() -> None:
    pool = problem_pool(QUESTION, "13", cot=[cot(0, "13", True), cot(1, "26", False)], program=[
        program(0, "print(8 + 5)", "13\n", True, tokens=4), program(1, "print(8 - 5)", "3\n", False),
        program(2, "print(13)", "13\n", True),
    ])  # fmt: skip
    pairs = {(p.rejected_id, p.chosen_id, p.rejected_failure) for p in run([pool]).preferences}
    right_program = f"m/{pool.id}/program/0"
    assert pairs == {
        (f"m/{pool.id}/cot/1", f"m/{pool.id}/cot/0", "wrong_value"),
        (f"m/{pool.id}/program/1", right_program, "wrong_value"),
        (f"m/{pool.id}/program/2", right_program, "literal_guess"),
    }


def test_unverified_candidates_are_counted_out() -> None:
    unchecked = dataclasses.replace(cot(1, "13", True), correct=None)
    exported = run([problem_pool(QUESTION, "13", cot=[cot(0, "13", True), unchecked])])
    assert len(exported.outcomes) == 1 and exported.left_out["candidates: unverifiable"] == 1


def test_no_development_or_sealed_problem_is_ever_exported() -> None:
    """A crafted calibration pool holding a development problem (its question in a held-out pool),
    a problem the split function puts on the development side, and a sealed problem: none is in
    any file; the ordinary problem beside them is."""
    right = {"cot": [cot(0, "13", True), cot(1, "26", False)]}
    development_q = "Development question: what is 8 + 5 when added?"
    held = problem_pool(development_q, "13", pid=side_id("heldout", "d"), split="heldout", **right)
    smuggled = problem_pool(f"  {development_q}\n", "13", pid=side_id("calibration", "s"), **right)
    by_split = problem_pool("Split function's side: what is 8 + 5?", "13", pid=side_id("heldout", "h"), **right)
    sealed = load_sealed()[0]
    sealed_pool = problem_pool(sealed.question, sealed.reference, pid=side_id("calibration", "z"), **right)
    ordinary = problem_pool(QUESTION, "13", pid=side_id("calibration", "o"), **right)
    exported = run([smuggled, by_split, sealed_pool, ordinary], development=[held])
    text = dumped(exported)
    asked = {text_hash(m.content) for r in exported.sft for m in r.messages}
    asked |= {text_hash(m.content) for r in exported.preferences for m in r.prompt}
    for pool in (smuggled, by_split, sealed_pool):
        assert pool.id not in text and text_hash(str(pool.problem["question"])) not in asked
    assert ordinary.id in text and {r.prompt_id for r in exported.sft} == {ordinary.id}
    assert exported.left_out == Counter({"problems: development_split": 2, "problems: sealed_split": 1})
