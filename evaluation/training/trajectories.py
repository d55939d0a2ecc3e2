"""Candidates as trajectories: a prompt, the assistant turn a model would be trained to write,
and the candidate's verified outcome.

The assistant turn is what the candidate did, written so a model can learn to do it whole: a
chain of thought or a code answer as the model wrote it; a program-of-thought answer as the
program (in a ```python block), what it printed, then the answer it printed in ``\\boxed{}``
(the form the problem's system prompt asks for). The prompt is the problem's own chat messages
(:meth:`~evaluation.problems.datasets.Problem.messages`) for every modality, so the same prompt
is the same training example whichever way it was answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evaluation.pools.store import DRAW_KINDS, ProblemPool
from evaluation.problems.datasets import Problem
from evaluation.training.formats import Candidate, ChatMessage
from evaluation.training.outcomes import Outcome, pool_outcome
from evaluation.training.withheld import DEVELOPMENT, Withheld, in_development

UNVERIFIABLE = "unverifiable"


@dataclass(frozen=True)
class Trajectory:
    """One candidate ready to export. ``completion`` is the model's own text (what duplicates
    are found by); ``assistant`` the turn exported."""

    candidate: Candidate
    prompt: tuple[ChatMessage, ...]
    completion: str
    assistant: str
    tokens: int
    outcome: Outcome


def normalized(text: str) -> str:
    """Whitespace collapsed, lowercased: two completions equal under it are one example."""
    return " ".join(text.split()).lower()


def program_turn(program: str, status: str, stdout: str, answer: str) -> str:
    """A program-of-thought answer as one assistant turn: program, what it printed, the answer.
    The output's block is tagged ``text``: an untagged block counts as Python to the served
    program-of-thought's reader (:func:`~services.search.strategies.program.program_source`
    takes the last Python block), which would run the printed value instead of the program."""
    parts = [f"```python\n{program.strip()}\n```"]
    if status == "ok":
        parts.append(f"Output:\n```text\n{stdout.rstrip()}\n```")
        if answer:
            parts.append(f"The answer is \\boxed{{{answer}}}.")
    else:
        parts.append(f"The program stopped: {status}.")
    return "\n\n".join(parts)


def prompt_messages(problem: Problem) -> tuple[ChatMessage, ...]:
    return tuple(ChatMessage(role=m["role"], content=m["content"]) for m in problem.messages())


def pool_trajectories(
    pools: Iterable[tuple[ProblemPool, str]], withheld: Withheld, left_out: Counter[str]
) -> list[Trajectory]:
    """Every verifiable candidate of the exportable problems of ``(pool, model)`` pairs, in pool
    order; what is left out is counted in ``left_out`` (problems of a withheld split, candidates
    that were never verified)."""
    found: list[Trajectory] = []
    for pool, model in pools:
        problem = Problem.from_dict(pool.problem)
        why = withheld.reason(problem.question) or (DEVELOPMENT if in_development(pool) else None)
        if why is not None:
            left_out[f"problems: {why}"] += 1
            continue
        prompt = prompt_messages(problem)
        for kind in DRAW_KINDS:
            draw = pool.draws.get(kind)
            for cand in draw.candidates if draw is not None else ():
                outcome = pool_outcome(problem, kind, cand)
                if outcome is None:
                    left_out[f"candidates: {UNVERIFIABLE}"] += 1
                    continue
                assistant = (
                    program_turn(cand.program, cand.status, cand.stdout, cand.answer)
                    if kind == "program" and cand.program
                    else cand.text
                )
                candidate = Candidate(
                    prompt_id=problem.id, candidate_id=f"{model}/{problem.id}/{kind}/{cand.index}",
                    source=f"pool:{model}", family=pool.family, task_kind=pool.kind, modality=kind,
                )  # fmt: skip
                found.append(
                    Trajectory(
                        candidate=candidate,
                        prompt=prompt,
                        completion=cand.text,
                        assistant=assistant,
                        tokens=cand.completion_tokens,
                        outcome=outcome,
                    )
                )
    return found
