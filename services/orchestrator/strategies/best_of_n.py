"""Best-of-N: sample N candidates in one batched call, score all with one verifier call, and
return the highest-scored (ties: the earliest). With a PRM, ``aggregation`` (min, product,
mean, last) turns step scores into one score — ``min``/``product`` are the sound choices
(PRIMER §6); ``mean`` hides the weak step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.orchestrator.params import Params
from services.orchestrator.strategies.base import Strategy
from services.orchestrator.strategies.config import StrategyInput, read_n
from services.orchestrator.strategies.context import Context
from services.orchestrator.strategies.results import Choice, Outcome
from services.orchestrator.strategies.verifier_choice import VerifierChoice, read_verifier


@dataclass(frozen=True)
class BestOfN(Strategy):
    name: ClassVar[str] = "best_of_n"
    n: int
    verifier: VerifierChoice

    @classmethod
    def from_input(cls, spec: StrategyInput) -> BestOfN:
        n = read_n(spec, 8)
        params = Params(spec.params)
        verifier = read_verifier(spec, params, default="orm")
        params.finish()
        return cls(n=n, verifier=verifier)

    async def run(self, ctx: Context) -> Outcome:
        await ctx.progress("generate", f"Sampling {self.n} candidates.")
        generated = await ctx.generate(self.n, parent_id=ctx.trace.root.id)
        scoreable = [g for g in generated if g.text.strip()]
        if not scoreable:
            return Outcome(None)
        await ctx.progress("score", f"Scoring {len(scoreable)} candidates with the {self.verifier.name} verifier.")
        verdicts = await ctx.verify(self.verifier, [g.text for g in scoreable], [g.node.id for g in scoreable])
        best = max(range(len(scoreable)), key=lambda i: (verdicts[i].score, -i))
        g, v = scoreable[best], verdicts[best]
        choice = Choice(
            g.text, g.node.id, g.candidate.finish_reason, g.candidate.completion_tokens, v.score, v.passed, True
        )
        ctx.offer(choice, force=True)
        await ctx.progress("select", f"Selected candidate {best + 1} of {len(scoreable)} (score {v.score:.3f}).")
        return Outcome(choice, "solved" if self.verifier.hard and v.passed else "completed")
