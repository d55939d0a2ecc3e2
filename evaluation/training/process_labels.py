"""Process labels by rollouts (Math-Shepherd): a step is labelled by whether completions drawn
from its prefix reach a verified-right answer.

For each chosen step of a chain of thought (:mod:`~evaluation.training.process_steps`) the policy
continues the prefix ``rollouts`` times (``assistant_prefix``: the partial assistant turn the
engine continues verbatim), sampled at the pools' temperature with seeds derived from the
candidate's id and the step's index, so a rollout is drawn again the same. Its token cap is the
pool's chain-of-thought cap less the prefix's tokens (estimated from the candidate's own token
count, in proportion to the characters), so the whole answer has the budget the pool gave it.

Each rollout is graded as the pools grade a chain of thought: the answer extracted from prefix
and continuation together, judged by the problem's own checker
(:func:`~evaluation.problems.problemset.answer_correct`), and right only as the export's outcome
label is right (:func:`~evaluation.training.outcomes.text_outcome`: a complete answer, stated,
not cut at ``max_tokens``). Never a judge's score. A step's ``value`` is the fraction of its
graded rollouts that are right (the soft estimate), ``reaches`` whether any is (the hard one).

An infrastructure error (the policy failed, a rollout missing from its reply or aborted) is never
a wrong answer: the rollout is not graded and is counted as an error; a step whose every rollout
failed so has no label. Tokens spent are recorded per rollout, step and candidate.

Records are plain dicts (one per candidate, written in chunks by the caller); :func:`pending`
says which chosen candidates no record holds yet.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from evaluation.problems.datasets import Problem
from evaluation.problems.problemset import answer_correct
from evaluation.training.outcomes import text_outcome
from evaluation.training.process_choice import Chosen
from evaluation.training.process_steps import MIN_STEP_CHARS, StepPrefix, split_steps, step_prefixes
from services.common.answers import extract_answer
from services.search.interfaces import Candidate, ComponentError, GenerateCall, Message, Policy

#: the checker of a chain of thought's extracted answer (``None``: it states none)
Check = Callable[[Problem, str | None], bool]


@dataclass(frozen=True)
class RolloutSettings:
    """How rollouts are drawn (recorded in every chunk; a resumed run must use the same).
    ``fallback_max_tokens``: the chain-of-thought cap where the pool records none;
    ``min_max_tokens``: the least a rollout may generate, however long its prefix."""

    rollouts: int = 4
    max_steps: int = 4
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0
    fallback_max_tokens: int = 1024
    min_max_tokens: int = 32
    min_step_chars: int = MIN_STEP_CHARS

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def rollout_seeds(candidate_id: str, step: int, seed: int, count: int) -> list[int]:
    """``count`` seeds of one step's rollouts, from the candidate's id and the step's index."""
    digest = hashlib.sha256(f"{seed}:{candidate_id}:step{step}".encode()).digest()
    return [int.from_bytes(digest[:4], "big") + i for i in range(count)]


def prefix_tokens(completion: str, tokens: int, end: int) -> int:
    """The tokens of ``completion[:end]``, estimated from the whole completion's ``tokens``."""
    return math.ceil(tokens * end / len(completion)) if completion else 0


def rollout_max_tokens(chosen: Chosen, step: StepPrefix, settings: RolloutSettings) -> int:
    """The pool's chain-of-thought cap (or the fallback) less the prefix's tokens, at least
    ``min_max_tokens``."""
    cap = chosen.max_tokens or settings.fallback_max_tokens
    used = prefix_tokens(chosen.trajectory.completion, chosen.trajectory.tokens, step.end)
    return max(settings.min_max_tokens, cap - used)


def completion_sha256(text: str) -> str:
    """Which completion a record labels (a record of another text is not this chain's)."""
    return hashlib.sha256(text.encode()).hexdigest()


def grade(problem: Problem, prefix: str, candidate: Candidate, seed: int, check: Check) -> dict[str, Any]:
    """One rollout's record: the continuation, its answer (read from prefix and continuation),
    the checker's verdict and whether it is right as an outcome label is right."""
    if candidate.finish_reason == "abort":
        return {"seed": seed, "error": "aborted by the engine", "tokens": candidate.completion_tokens}
    answer = extract_answer(prefix + candidate.text)
    correct = check(problem, answer)
    cut = candidate.finish_reason == "length"
    right = text_outcome(problem, correct, answer or "").label and not cut
    return {"seed": seed, "text": candidate.text, "finish": candidate.finish_reason, "answer": answer or "",
            "correct": correct, "right": right, "cut": cut, "tokens": candidate.completion_tokens}  # fmt: skip


def _messages(chosen: Chosen) -> tuple[Message, ...]:
    return tuple(Message(m.role, m.content) for m in chosen.trajectory.prompt)


class StepLabeller:
    """Labels chosen chains of thought through an injected :class:`~services.search.interfaces.Policy`."""

    def __init__(self, policy: Policy, settings: RolloutSettings, check: Check = answer_correct) -> None:
        self._policy = policy
        self._check = check
        self.settings = settings

    async def label(self, chosen: Chosen) -> dict[str, Any]:
        """One candidate's record: every chosen step's rollouts at once, graded and counted."""
        began = time.monotonic()
        completion = chosen.trajectory.completion
        prefixes = step_prefixes(completion, self.settings.max_steps, self.settings.min_step_chars)
        steps = await asyncio.gather(*(self._step(chosen, p) for p in prefixes))
        candidate = chosen.trajectory.candidate
        return {
            "type": "record", "candidate_id": candidate.candidate_id, "prompt_id": candidate.prompt_id,
            "family": candidate.family, "task_kind": candidate.task_kind, "label": chosen.trajectory.outcome.label,
            "completion_sha256": completion_sha256(completion),
            "steps_total": len(split_steps(completion, self.settings.min_step_chars)),
            "steps": list(steps), "generated_tokens": sum(s["generated_tokens"] for s in steps),
            "prompt_tokens": sum(s["prompt_tokens"] for s in steps), "wall_s": round(time.monotonic() - began, 3),
        }  # fmt: skip

    async def _step(self, chosen: Chosen, step: StepPrefix) -> dict[str, Any]:
        s = self.settings
        seeds = rollout_seeds(chosen.candidate_id, step.index, s.seed, s.rollouts)
        max_tokens = rollout_max_tokens(chosen, step, s)
        call = GenerateCall(_messages(chosen), n=len(seeds), seeds=tuple(seeds), max_tokens=max_tokens,
                            temperature=s.temperature, top_p=s.top_p, assistant_prefix=step.prefix)  # fmt: skip
        error, prompt_tokens, drawn = "", 0, []
        try:
            generation = await self._policy.generate(call)
        except ComponentError as err:
            error = str(err)
        else:
            prompt_tokens = generation.prompt_tokens
            replies = zip(generation.candidates, seeds, strict=False)  # a short reply: the rest are errors
            drawn = [grade(chosen.problem, step.prefix, c, seed, self._check) for c, seed in replies]
        missing = error or "missing from the reply"
        drawn += [{"seed": seed, "error": missing, "tokens": 0} for seed in seeds[len(drawn) :]]
        graded = [r for r in drawn if "error" not in r]
        return {
            "index": step.index, "text": step.text, "end": step.end, "max_tokens": max_tokens,
            "rollouts": len(graded), "right": sum(r["right"] for r in graded), "cut": sum(r["cut"] for r in graded),
            "errors": len(drawn) - len(graded), "error": error, "generated_tokens": sum(r["tokens"] for r in drawn),
            "prompt_tokens": prompt_tokens, "drawn": drawn,
        }  # fmt: skip


def newest(records: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Candidate id -> its newest record (records oldest first, as the chunks are read)."""
    return {str(r["candidate_id"]): r for r in records}


def failed_whole(record: Mapping[str, Any]) -> bool:
    """Whether no rollout of the record was graded (every one failed for infrastructure)."""
    return not any(step["rollouts"] for step in record["steps"])


def pending(chosen: Sequence[Chosen], records: Iterable[Mapping[str, Any]], retry_errors: bool = False) -> list[Chosen]:
    """The chosen candidates no record holds (or, with ``retry_errors``, whose newest record
    graded nothing), in order."""
    done = newest(records)

    def wanted(c: Chosen) -> bool:
        found = done.get(c.candidate_id)
        return found is None or (retry_errors and failed_whole(found))

    return [c for c in chosen if wanted(c)]
