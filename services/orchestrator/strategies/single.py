"""Single sample: one greedy (temperature 0) or sampled answer — the baseline every other
strategy is compared against. With a verifier it also reports that answer's score.

``params.greedy`` decodes at temperature 0 whatever the job's temperature: the effort ladder's
``none`` rung is one greedy sample, the cheapest honest answer (PRIMER §8)."""

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
class Single(Strategy):
    name: ClassVar[str] = "single"
    verifier: VerifierChoice | None = None
    greedy: bool = False

    @classmethod
    def from_input(cls, spec: StrategyInput) -> Single:
        read_n(spec, 1, maximum=1)
        params = Params(spec.params)
        verifier = read_verifier(spec, params, default="orm") if spec.verifier else None
        greedy = params.boolean("greedy", False)
        params.finish()
        return cls(verifier=verifier, greedy=greedy)

    async def run(self, ctx: Context) -> Outcome:
        await ctx.progress("generate", "Generating one answer.")
        generated = await ctx.generate(1, parent_id=ctx.trace.root.id, temperature=0.0 if self.greedy else None)
        if not generated:
            return Outcome(None)
        g = generated[0]
        choice = Choice(g.text, g.node.id, g.candidate.finish_reason, g.candidate.completion_tokens)
        ctx.offer(choice, force=True)
        if self.verifier is not None and g.text.strip():
            verdict = (await ctx.verify(self.verifier, [g.text], [g.node.id]))[0]
            choice.score, choice.passed, choice.scored = verdict.score, verdict.passed, True
        solved = self.verifier is not None and self.verifier.hard and choice.passed
        return Outcome(choice, "solved" if solved else "completed")
