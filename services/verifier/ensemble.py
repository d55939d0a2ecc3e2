"""A weighted ensemble: several verifiers judge the same candidates, scores are averaged by weight.

Weak verifiers with different blind spots combined can beat any one of them (Weaver,
PRIMER §6). Members run concurrently; a member that could not judge a candidate (``error``)
drops out of that candidate's average instead of counting as a zero.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from services.common.verifiers import ENSEMBLE, check_ensemble
from services.verifier.base import VerifierInfo, VerifierKind
from services.verifier.tasks import run_bounded
from services.verifier.types import Outcome, Spend, Verdict, VerifyJob, WeightedName

NAME = ENSEMBLE


def validate_weights(members: Sequence[WeightedName], known: Callable[[str], bool]) -> None:
    """The shared ensemble rule (``services/common/verifiers.py``), which the orchestrator applies too."""
    check_ensemble([(m.name, m.weight) for m in members], known=known)


def combine(members: Sequence[tuple[WeightedName, Outcome]], n_candidates: int) -> list[Verdict]:
    """Weighted mean of member scores per candidate, skipping members that erred on it."""
    verdicts = []
    for c in range(n_candidates):
        total = weight = 0.0
        parts, errors = [], []
        step_scores: list[float] = []
        answer = ""
        for member, outcome in members:
            v = outcome.verdicts[c]
            if v.error:
                errors.append(f"{member.name}: {v.error}")
                continue
            score = 0.0 if math.isnan(v.score) else min(1.0, max(0.0, v.score))
            total += member.weight * score
            weight += member.weight
            parts.append(f"{member.name}={score:.3f}")
            step_scores = step_scores or list(v.step_scores)
            answer = answer or v.extracted_answer
        if weight <= 0:
            error = "; ".join(errors) if errors else "no member with a positive weight could judge this candidate"
            verdicts.append(Verdict(extracted_answer=answer, error=error))
            continue
        score = total / weight
        feedback = " ".join(parts) + (f" (skipped: {'; '.join(errors)})" if errors else "")
        verdicts.append(
            Verdict(
                score=score, passed=score >= 0.5, step_scores=step_scores, extracted_answer=answer, feedback=feedback
            )
        )
    return verdicts


class Ensemble(VerifierKind):
    info = VerifierInfo(name=NAME)

    def __init__(self, lookup: Callable[[str], VerifierKind | None]) -> None:
        self.lookup = lookup

    def _members(self, job: VerifyJob) -> list[tuple[WeightedName, VerifierKind]]:
        validate_weights(job.ensemble, lambda name: self.lookup(name) is not None)
        return [(m, kind) for m in job.ensemble if (kind := self.lookup(m.name)) is not None and m.weight > 0]

    def validate(self, job: VerifyJob) -> None:
        for _, kind in self._members(job):
            kind.validate(job)

    async def verify(self, job: VerifyJob) -> Outcome:
        members = self._members(job)
        outcomes = await run_bounded([functools.partial(k.verify, job) for _, k in members], len(members))
        spend = Spend()
        for outcome in outcomes:
            spend.add(outcome.spend)
        return Outcome(
            combine([(m, o) for (m, _), o in zip(members, outcomes, strict=True)], len(job.candidates)), spend
        )
