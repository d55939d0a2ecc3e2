"""The evaluation's draw over scripted components: greedy answers only by default (no sampled
call at all), programs keyed as program-of-thought keys them, sealed problems judged by their
family's own checker, and a run that resumes after its chunks and refuses another model's."""

from __future__ import annotations

import asyncio
import contextlib
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from evaluation.pools.store import read_pools
from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct
from evaluation.training.eval_draw import EvalDrawer, EvalDrawSettings
from evaluation.training.eval_run import MixedRun, draw_chunks
from evaluation.training.eval_sets import EvalProblem, sealed_correct, sealed_problems
from services.search.interfaces import Candidate, GenerateCall, Generation, ProgramRun
from services.search.strategies import program as pot

SETTINGS = EvalDrawSettings(cot_max_tokens=64, program_max_tokens=64, code_max_tokens=64, program_timeout_s=5.0)


class Scripted:
    """Programs for program prompts, thoughts otherwise, in turn; counts the calls."""

    def __init__(self, thoughts: Sequence[str], programs: Sequence[str]) -> None:
        self.thoughts, self.programs = list(thoughts), list(programs)
        self.calls: list[GenerateCall] = []

    async def generate(self, call: GenerateCall, **_: Any) -> Generation:
        self.calls.append(call)
        source = self.programs if pot.PROGRAM_INSTRUCTION in call.messages[-1].content else self.thoughts
        return Generation(tuple(Candidate(source.pop(0), "stop", 7, s) for s in call.seeds), prompt_tokens=30)


class Python:
    async def run(self, code: str, *, wall_seconds: float) -> ProgramRun:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(code, {})
        return ProgramRun("ok", out.getvalue())


def item(question: str = "What is 2 + 3?", pid: str = "chain_sum/L1/x") -> EvalProblem:
    return EvalProblem(Problem(pid, "chain_sum", 1, question, "5"), "chain_sum", "arithmetic", answer_correct)


def test_greedy_only_draws_one_candidate_per_kind() -> None:
    policy = Scripted(["So \\boxed{5}."], ["```python\nprint(2 + 3)\n```"])
    pool = asyncio.run(EvalDrawer(policy, Python(), None, SETTINGS).draw(item(), "heldout"))
    assert len(policy.calls) == 2 and all(c.temperature == 0.0 and c.n == 1 for c in policy.calls)
    cot, program = pool.draws["cot"], pool.draws["program"]
    assert cot.greedy is not None and cot.greedy.correct and not cot.sampled
    assert program.greedy is not None and program.greedy.correct and program.greedy.key == "5"
    assert pool.split == "heldout" and pool.family == "chain_sum"


def test_samples_are_drawn_for_a_vote_and_a_literal_program_abstains() -> None:
    policy = Scripted(["\\boxed{5}", "\\boxed{5}", "\\boxed{4}"],
                      ["```python\nprint(5)\n```", "```python\nprint(2 + 3)\n```", "no code ("])  # fmt: skip
    settings = EvalDrawSettings(**{**SETTINGS.as_dict(), "samples": 2})
    pool = asyncio.run(EvalDrawer(policy, Python(), None, settings).draw(item(), "heldout"))
    programs = pool.draws["program"].candidates
    assert [c.greedy for c in programs] == [True, False, False]
    assert programs[0].correct and programs[0].key == ""  # printed the literal 5: no vote
    assert programs[1].key == "5" and programs[2].correct is False
    assert [c.key for c in pool.draws["cot"].sampled] == ["5", "4"]


def test_a_sealed_problem_is_judged_by_its_familys_checker() -> None:
    sealed = sealed_problems()
    first = sealed[0]
    assert first.kind == "sealed" and first.problem.extra["rg_entry"]
    assert sealed_correct(first.problem, first.problem.reference)
    assert not sealed_correct(first.problem, "certainly not the answer") and not sealed_correct(first.problem, None)


def chunks(drawer: EvalDrawer, problems: list[EvalProblem], folder: Path, provenance: dict[str, Any]) -> int:
    return asyncio.run(draw_chunks(drawer, problems, folder, "heldout", provenance, chunk_size=1, log=lambda _: None))


def test_the_run_resumes_after_its_chunks_and_refuses_another_model(tmp_path: Path) -> None:
    problems = [item(f"What is 2 + 3, case {i}?", f"chain_sum/L1/x{i}") for i in range(3)]
    provenance = {"model": "m", "model_sha256": "aa", "settings": SETTINGS.as_dict()}
    script = Scripted(["\\boxed{5}"] * 3, ["```python\nprint(2 + 3)\n```"] * 3)
    drawer = EvalDrawer(script, Python(), None, SETTINGS)
    assert chunks(drawer, problems[:2], tmp_path, provenance) == 2
    assert chunks(drawer, problems, tmp_path, provenance) == 1  # only what no chunk holds
    assert [p.id for p in read_pools(tmp_path, "heldout")] == [p.problem.id for p in problems]
    with pytest.raises(MixedRun, match="model_sha256"):
        chunks(drawer, problems, tmp_path, {**provenance, "model_sha256": "bb"})
