"""The generative judges' arithmetic and wording: P("Yes") from log-probabilities, and prompts.

A generative verifier asks the policy model a Yes/No question and reads the answer's
probability (PRIMER §6). Scoring the two continuations and normalizing over them,
``P(Yes) / (P(Yes) + P(No))``, is exact and needs no top-k list; when both continuations
share a text before the label, that shared part cancels in the ratio, which is what lets the
PRM put every prefix of every candidate into one Score call.
"""

from __future__ import annotations

import math

from services.verifier.types import JudgePrompt, Message


def yes_probability(logprob_yes: float, logprob_no: float) -> float:
    """``P(Yes) / (P(Yes) + P(No))`` from two log-probabilities, computed without overflow.

    Degenerate inputs give 0 (no evidence of correctness): NaN, or both labels impossible.
    """
    if math.isnan(logprob_yes) or math.isnan(logprob_no):
        return 0.0
    if logprob_yes == -math.inf and logprob_no == -math.inf:
        return 0.0
    if logprob_no == -math.inf:
        return 1.0
    if logprob_yes == -math.inf:
        return 0.0
    diff = logprob_yes - logprob_no
    if diff >= 0:
        return 1.0 / (1.0 + math.exp(-diff))
    z = math.exp(diff)
    return z / (1.0 + z)


def problem_text(problem: tuple[Message, ...]) -> str:
    """What was asked: the non-system turns' contents (the system prompt is not the problem)."""
    turns = [m.content.strip() for m in problem if m.role != "system" and m.content.strip()]
    if not turns:
        turns = [m.content.strip() for m in problem if m.content.strip()]
    return "\n\n".join(turns)


def orm_prompt(problem: str, candidate: str, system: str, question: str) -> JudgePrompt:
    """A chat prompt asking whether one whole solution is correct; the judge's first word is scored."""
    user = f"Problem:\n{problem}\n\nProposed solution:\n{candidate.strip()}\n\n{question}"
    return JudgePrompt(messages=(Message("system", system), Message("user", user)))


def prm_header(problem: str) -> JudgePrompt:
    """The raw-text prompt every PRM continuation shares: instructions and the problem."""
    text = (
        "Below is a problem and a step-by-step solution. After a solution prefix, a careful "
        "grader states whether its last step is correct.\n\n"
        f"Problem:\n{problem}\n\nSolution:\n"
    )
    return JudgePrompt(text=text)


def prm_continuation(steps: list[str], upto: int, question: str, label: str) -> str:
    """The first ``upto`` steps, then the question and one label, as one scored continuation."""
    prefix = "\n\n".join(steps[:upto])
    return f"{prefix}\n\n{question}{label}"
