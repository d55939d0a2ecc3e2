"""Best-of-N: sample N candidates in one batched call, score all with one verifier call, and
return the highest-scored (ties: the earliest). With a PRM, ``aggregation`` (min, product,
mean, last) turns step scores into one score — ``min``/``product`` are the sound choices
(PRIMER §6); ``mean`` hides the weak step.

With tools or a response format, candidates without a vote key (a tool call that does not
validate against its schema, text that is not the required JSON) are not scored unless no
candidate has one; the verifier judges the text with its tool calls rendered.

The chosen answer carries its confidence signals (family ``bon``, :mod:`~.signals`): the
judge's score of it, and how many of the N drawn candidates share its vote key (every drawn
candidate a ballot, as the calibration replay counts them).

With ``n`` = 1 the judge scores the one candidate and keeps it, so it streams as the answer
where the job streams its answer (``AnswerStream.sole``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context
from services.search.strategies.results import Outcome
from services.search.strategies.signals import BON, vote_signals
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier


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
        generated = await ctx.generate(self.n, parent_id=ctx.trace.root.id, on_text=ctx.answer.sole(self.n))
        scoreable = [g for g in generated if g.shown.strip()]
        if ctx.keys.structured:
            scoreable = [g for g in scoreable if ctx.keys.key(g.candidate)] or scoreable
        if not scoreable:
            return Outcome(None)
        verdicts = await ctx.verify(self.verifier, [g.shown for g in scoreable], [g.node.id for g in scoreable])
        order = sorted(range(len(scoreable)), key=lambda i: (-verdicts[i].score, i))
        ctx.ranking = [
            scoreable[i].choice(score=verdicts[i].score, passed=verdicts[i].passed, scored=True) for i in order
        ]
        best = order[0]
        v = verdicts[best]
        choice = ctx.ranking[0]
        keys = [ctx.keys.key(g.candidate) for g in generated]
        chosen = ctx.keys.key(scoreable[best].candidate)
        choice.signals = vote_signals(BON, keys, [1.0] * len(keys), chosen, judge_score=v.score)
        ctx.offer(choice, force=True)
        ctx.event("select", f"chose {ctx.label(scoreable[best].node.id)} (score {v.score:.2f})")
        return Outcome(choice, "solved" if self.verifier.hard and v.passed else "completed")
