"""The generative outcome reward model: P("Yes") that the whole solution is correct.

Every candidate gets its own judging prompt (the solution sits in the user turn, where an
instruct model expects the thing to judge) and one Score call with the two labels as
continuations; the calls of all candidates run concurrently.
"""

from __future__ import annotations

import functools

from services.verifier.base import VerifierInfo, VerifierKind, answer_of, require_problem
from services.verifier.judge import orm_prompt, problem_text, yes_probability
from services.verifier.settings import VerifierSettings
from services.verifier.tasks import run_bounded
from services.verifier.types import Outcome, PolicyError, PolicyScorer, Spend, Verdict, VerifyJob


class OutcomeRewardModel(VerifierKind):
    info = VerifierInfo(name="orm", generative=True)

    def __init__(self, policy: PolicyScorer, settings: VerifierSettings) -> None:
        self.policy = policy
        self.settings = settings

    def validate(self, job: VerifyJob) -> None:
        require_problem(job, self.info.name)

    async def verify(self, job: VerifyJob) -> Outcome:
        s = self.settings
        problem = problem_text(job.problem)
        spend = Spend()

        async def judge(candidate: str) -> Verdict:
            answer = answer_of(candidate)
            if not candidate.strip():
                return Verdict(feedback="empty candidate", extracted_answer=answer)
            prompt = orm_prompt(problem, candidate, s.orm_system_prompt, s.orm_question)
            try:
                result = await self.policy.score(prompt, [s.orm_yes, s.orm_no], model=job.model)
            except PolicyError as err:
                return Verdict(extracted_answer=answer, error=f"policy error: {err}")
            spend.add(result.spend)
            p_yes = yes_probability(result.totals[0], result.totals[1])
            return Verdict(
                score=p_yes, passed=p_yes >= 0.5, extracted_answer=answer, feedback=f"judge P(Yes)={p_yes:.4f}"
            )

        limit = await self.policy.parallelism()
        verdicts = await run_bounded([functools.partial(judge, c) for c in job.candidates], limit)
        return Outcome(verdicts, spend)
