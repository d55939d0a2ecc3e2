"""Single sample: one greedy (temperature 0) or sampled answer — the baseline every other
strategy is compared against. With a verifier it also reports that answer's score.

``params.greedy`` decodes at temperature 0 whatever the job's temperature: the effort ladder's
``none`` rung is one greedy sample, the cheapest honest answer (PRIMER §8).

With ``SearchJob.answers`` = k > 1 it draws k samples in one call (OpenAI's n); the first is
the answer (greedy with ``greedy``, the others then sampled at the job's temperature). One
answer streams token by token when the job streams it.

Its answer carries no confidence signals, so the reply's ``ttc.confidence`` is null: one sample
has no vote to read, and the fitted greedy family is a constant (docs/confidence.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, GenRequest
from services.search.strategies.results import Outcome
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier


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
        root = ctx.trace.root.id
        if ctx.answers > 1:
            requests = [GenRequest(ctx.answers, root, answer=True)]
            if self.greedy:
                requests = [
                    GenRequest(1, root, temperature=0.0, answer=True),
                    GenRequest(ctx.answers - 1, root, answer=True),
                ]
            generated = [g for batch in await ctx.generate_many(requests) for g in batch]
        else:
            temperature = 0.0 if self.greedy else None
            generated = await ctx.generate(
                1, parent_id=root, temperature=temperature, on_text=ctx.answer.sink(), answer=True
            )
        if not generated:
            return Outcome(None)
        ctx.ranking = [g.choice() for g in generated]
        g = generated[0]
        choice = ctx.ranking[0]
        ctx.offer(choice, force=True)
        if self.verifier is not None and g.shown.strip():
            verdict = (await ctx.verify(self.verifier, [g.shown], [g.node.id]))[0]
            choice.score, choice.passed, choice.scored = verdict.score, verdict.passed, True
        solved = self.verifier is not None and self.verifier.hard and choice.passed
        return Outcome(choice, "solved" if solved else "completed")
