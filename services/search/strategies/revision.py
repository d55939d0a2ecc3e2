"""Sequential revision: the model sees its previous attempt and the verifier's feedback
(judge remark, failing test output, score) and writes an improved attempt.

``n`` independent chains start from one batched call; each round, every chain that has not
passed is revised once (the revisions run concurrently, one call per chain because each has
its own conversation) and re-verified in one verifier call. The search stops as soon as an
attempt passes a hard verifier (``solved``) or after ``rounds`` revisions; the answer is the
best-scored attempt of all (later attempts win ties, since they saw more feedback).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from services.search.interfaces import Message, Verdict
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, Generated, GenRequest
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier

_FEEDBACK_CHARS = 2000


def refine_messages(problem: Sequence[Message], answer: str, verdict: Verdict) -> tuple[Message, ...]:
    """The problem, the previous attempt as the assistant's turn, and feedback asking for a revision."""
    feedback = verdict.feedback.strip()[:_FEEDBACK_CHARS]
    remark = f"Feedback: {feedback}\n" if feedback else ""
    request = (
        f"A checker scored your answer {verdict.score:.2f} out of 1 "
        f"({'accepted' if verdict.passed else 'not accepted'}).\n{remark}"
        "Review your previous answer, fix any mistake, and write a complete improved solution. "
        "State the final answer at the end."
    )
    return (*problem, Message("assistant", answer), Message("user", request))


@dataclass
class Attempt:
    generated: Generated
    verdict: Verdict
    messages: tuple[Message, ...]
    tokens: int


@dataclass(frozen=True)
class Revision(Strategy):
    name: ClassVar[str] = "revision"
    chains: int
    rounds: int
    verifier: VerifierChoice

    @classmethod
    def from_input(cls, spec: StrategyInput) -> Revision:
        chains = read_n(spec, 1, maximum=64)
        params = Params(spec.params)
        rounds = params.integer("rounds", 3, minimum=0, maximum=32)
        verifier = read_verifier(spec, params, default="orm")
        params.finish()
        return cls(chains, rounds, verifier)

    async def run(self, ctx: Context) -> Outcome:
        first = [g for g in await ctx.generate(self.chains, parent_id=ctx.trace.root.id) if g.text.strip()]
        if not first:
            return Outcome(None)
        verdicts = await ctx.verify(self.verifier, [g.text for g in first], [g.node.id for g in first])
        chains = [
            Attempt(g, v, ctx.problem, g.candidate.completion_tokens) for g, v in zip(first, verdicts, strict=True)
        ]
        attempts = list(chains)
        self._offer(ctx, attempts)
        for round_ in range(self.rounds):
            if any(a.verdict.passed for a in chains) and self.verifier.hard:
                break
            open_chains = [a for a in chains if not a.verdict.passed]
            if not open_chains:
                break
            ctx.event("revision", f"round {round_ + 1}: revising {len(open_chains)} attempt(s) with feedback")
            requests = [
                GenRequest(
                    n=1,
                    parent_id=a.generated.node.id,
                    action="refine",
                    messages=refine_messages(ctx.problem, a.generated.text, a.verdict),
                    offer=False,
                )
                for a in open_chains
            ]
            results = await ctx.generate_many(requests)
            revised = [(a, r[0]) for a, r in zip(open_chains, results, strict=True) if r and r[0].text.strip()]
            if not revised:
                break
            verdicts = await ctx.verify(self.verifier, [g.text for _, g in revised], [g.node.id for _, g in revised])
            for (old, g), v in zip(revised, verdicts, strict=True):
                new = Attempt(g, v, old.messages, g.candidate.completion_tokens)
                chains[chains.index(old)] = new
                attempts.append(new)
            self._offer(ctx, attempts)
        best = self._best(attempts)
        choice = self._choice(best)
        ctx.offer(choice, force=True)
        order = sorted(enumerate(attempts), key=lambda ia: (ia[1].verdict.passed, ia[1].verdict.score, ia[0]))
        ctx.ranking = [self._choice(a) for _, a in reversed(order)]
        return Outcome(choice, "solved" if self.verifier.hard and best.verdict.passed else "completed")

    @staticmethod
    def _best(attempts: list[Attempt]) -> Attempt:
        return max(enumerate(attempts), key=lambda ia: (ia[1].verdict.passed, ia[1].verdict.score, ia[0]))[1]

    @staticmethod
    def _choice(a: Attempt) -> Choice:
        return a.generated.choice(answer_tokens=a.tokens, score=a.verdict.score, passed=a.verdict.passed, scored=True)

    def _offer(self, ctx: Context, attempts: list[Attempt]) -> None:
        ctx.offer(self._choice(self._best(attempts)), force=True)
