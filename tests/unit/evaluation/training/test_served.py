"""Served traces: only the opted-in keys' own traces are exported, only what an independent check
verifies (a known problem's checker, the job's reference), never a development or sealed prompt,
and the search's own verifier score is never read."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evaluation.problems.datasets import Problem
from evaluation.problems.sealed import load_sealed, sealed_hashes, text_hash
from evaluation.training.export import export
from evaluation.training.served import served_trajectories
from evaluation.training.withheld import Withheld
from tests.unit.evaluation.training.fixtures import problem_pool, side_id, trace

KNOWN = Problem("chain_sum/L1/k", "chain_sum", 1, "What is 17 + 25? Add them.", "42")
DEVELOPMENT_Q = "A development question nobody may train on: what is 6 times 7 exactly?"


def exported_ids(traces: dict[str, tuple[dict[str, Any], str]], opted_in: set[str]) -> tuple[set[str], Counter[str]]:
    sealed = load_sealed()
    development = [problem_pool(DEVELOPMENT_Q, "42", pid=side_id("heldout", "d"), split="heldout")]
    withheld = Withheld.build(development, sealed_hashes(), (p.question for p in sealed))
    left_out: Counter[str] = Counter()
    found = served_trajectories(traces, opted_in, withheld, {text_hash(KNOWN.question): KNOWN}, left_out)
    rows = export(found, left_out)
    ids = {r.prompt_id for r in rows.outcomes} | {r.prompt_id for r in rows.sft}
    return ids, rows.left_out


def test_only_the_opted_in_keys_own_traces() -> None:
    right = "17 + 25 = 42, so the answer is \\boxed{42}."
    traces = {
        "a1": (trace(KNOWN.question, right), "alice"),
        "b1": (trace(KNOWN.question, right + " "), "bob"),  # bob did not opt in
        "n1": (trace(KNOWN.question, right + "  "), ""),  # no recorded owner
    }
    ids, left_out = exported_ids(traces, {"alice"})
    assert ids == {"served/a1"}
    assert left_out["served traces: owner not opted in"] == 2


def test_verified_by_the_known_problem_or_the_reference_else_left_out() -> None:
    traces = {
        "known-right": (trace(KNOWN.question, "It is \\boxed{42}."), "alice"),
        "ref-wrong": (trace("What is 2 + 3?", "It is \\boxed{6}.", reference="5"), "alice"),
        "unchecked": (trace("What is 2 + 4?", "It is \\boxed{6}."), "alice"),
        "cut": (trace(KNOWN.question, "It is \\boxed{42}. And", finish="length"), "alice"),
    }
    sealed = load_sealed()
    withheld = Withheld.build([], sealed_hashes(), (p.question for p in sealed))
    left_out: Counter[str] = Counter()
    found = served_trajectories(traces, {"alice"}, withheld, {text_hash(KNOWN.question): KNOWN}, left_out)
    labels = {t.candidate.prompt_id: (t.outcome.label, t.outcome.failure) for t in found}
    assert labels == {
        "served/known-right": (True, None),
        "served/ref-wrong": (False, "wrong_value"),
        "served/cut": (False, "cut"),
    }
    assert left_out == Counter({"served traces: unverifiable": 1})


def test_the_search_verifier_score_is_never_read() -> None:
    loved = trace("What is 2 + 3?", "It is \\boxed{6}.", reference="5", score=1.0)
    found = served_trajectories({"t": (loved, "alice")}, {"alice"}, Withheld(frozenset(), frozenset()), {}, Counter())
    assert [(t.outcome.label, t.outcome.failure) for t in found] == [(False, "wrong_value")]


def test_a_program_node_is_its_program_output_and_answer() -> None:
    doc = trace(KNOWN.question, "```python\nprint(17 + 25)\n```")
    doc["nodes"][1]["execution"] = {"status": "ok", "stdout": "42\n", "answer": "42"}
    found = served_trajectories({"p": (doc, "alice")}, {"alice"}, Withheld(frozenset(), frozenset()),
                                {text_hash(KNOWN.question): KNOWN}, Counter())  # fmt: skip
    assert [(t.candidate.modality, t.outcome.label) for t in found] == [("program", True)]
    assert "Output:\n```text\n42\n```" in found[0].assistant and found[0].assistant.endswith("\\boxed{42}.")


def test_development_and_sealed_prompts_are_never_exported() -> None:
    sealed_q = load_sealed()[0].question
    traces = {
        "dev": (trace(DEVELOPMENT_Q, "\\boxed{42}", reference="42"), "alice"),
        "dev-inside": (trace(f"Please help.\n{DEVELOPMENT_Q}\nThanks", "\\boxed{42}", reference="42"), "alice"),
        "sealed": (trace(sealed_q, "\\boxed{x}", reference="x"), "alice"),
    }
    ids, left_out = exported_ids(traces, {"alice"})
    assert ids == set()
    assert left_out == Counter({"served traces: development_split": 2, "served traces: sealed_split": 1})
