"""Adaptive vote: a first wave that can disagree, then more compute only while the request's own
candidates stay unsettled.

A fixed configuration spends the same on every request of a kind: one greedy program is right
almost always on the calibration's arithmetic, so a fixed route never draws a second, and a
request whose one program computed the wrong function gets no second look. This strategy reads
the request instead. It draws a first wave of at least two candidates of its starting modality
(programs, or chains of thought for prompts no rule recognized as computable), and then, while
the vote is not settled, takes the route's next step: more of the same, the other modality, or
the larger deployment, each step doubling what was drawn, until the effort's cap ``n``.
When it is settled, and what comes next, is decided by the pure rules of
:mod:`~services.search.strategies.adaptive_policy`, which the calibration replay
(:mod:`evaluation.pricing.adaptive`) applies to the pools to fit ``confidence`` and the order.

Programs run in the sandbox and vote on what they printed, abstaining when they crash, time out
or print a literal they did not compute (as in
:class:`~services.search.strategies.program.ProgramOfThought`, whose drawing, execution and final
decision this strategy reuses); chains of thought vote with ``thought_weight``. The chosen answer,
its evidence and its confidence signals are the program-of-thought vote's over every ballot
drawn. The trace's ``adaptive`` node records each step and why the vote stopped.

Params: ``start`` (``program`` | ``thought``), ``first_wave`` (>= 2), ``steps`` (comma-separated
order of ``more``, ``other``, ``escalate``), ``confidence`` (0.5..1), ``thought_weight``,
``timeout_s`` (a program's wall time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from services.common.answers import requested_decimals
from services.common.errors import InvalidArgument
from services.search.interfaces import Message, Policy
from services.search.params import Params
from services.search.strategies import adaptive_policy as policy
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, Generated
from services.search.strategies.program import Ballot, ProgramOfThought, program_messages
from services.search.strategies.results import Choice, Course, Outcome
from services.search.strategies.text import question_text


@dataclass(frozen=True)
class Adaptive(Strategy):
    name: ClassVar[str] = "adaptive"
    n: int = 8  # the effort's cap on candidates
    start: policy.Modality = "program"
    first_wave: int = 2
    steps: tuple[str, ...] = ("other", "more")
    confidence: float = 0.9
    thought_weight: float = 0.5
    timeout_s: float = 5.0

    @classmethod
    def from_input(cls, spec: StrategyInput) -> Adaptive:
        n = read_n(spec, 8, minimum=2, maximum=64)
        if spec.verifier:
            raise InvalidArgument("adaptive votes on executed outputs and answers; it takes no verifier",
                                  "strategy.verifier")  # fmt: skip
        params = Params(spec.params)
        start = params.string("start", "program", choices=policy.MODALITIES)
        first_wave = params.integer("first_wave", 2, minimum=2, maximum=64)
        if first_wave > n:
            raise InvalidArgument(f"first_wave {first_wave} exceeds the cap n={n}", "strategy.params.first_wave")
        try:
            steps = policy.parse_order(params.string("steps", "other,more"))
        except ValueError as exc:
            raise InvalidArgument(str(exc), "strategy.params.steps") from exc
        strategy = cls(
            n=n,
            start=start,  # type: ignore[arg-type]
            first_wave=first_wave,
            steps=steps,
            confidence=params.number("confidence", 0.9, minimum=0.5, maximum=1.0),
            thought_weight=params.number("thought_weight", 0.5, minimum=0.0, maximum=10.0),
            timeout_s=params.number("timeout_s", 5.0, minimum=0.5, maximum=60.0),
        )
        params.finish()
        return strategy

    def _voter(self, thoughts: int) -> ProgramOfThought:
        """The program-of-thought vote this run's ballots are drawn, run and decided by."""
        return ProgramOfThought(
            n=self.n, mode="hybrid" if thoughts else "program", cot=thoughts, cot_weight=self.thought_weight,
            early_stop=False, timeout_s=self.timeout_s, fallback=False, retries=0,
        )  # fmt: skip

    async def run(self, ctx: Context) -> Outcome:
        decimals = requested_decimals(question_text(ctx.problem))
        programs = program_messages(ctx.problem)
        voter = self._voter(0)
        node = ctx.trace.add(ctx.trace.root.id, "adaptive", text="", score=0.0, visits=0)
        course = ctx.course = Course(self.first_wave)
        ballots: list[Ballot] = []
        ballots += await self._draw(ctx, voter, programs, self.start, self.first_wave, decimals, first=True)
        reason = policy.settled(self._view(ballots), self.confidence, start=self.start)
        course.first_wave_settled = bool(reason)
        index = 0
        while not reason:
            step = policy.next_step(index, len(ballots), self.n, self.steps, self.start,
                                    can_escalate=ctx.escalation is not None)  # fmt: skip
            if step is None or ctx.budget.tokens_left() <= 0:
                reason = "cap"
                break
            index += 1
            where = " on the larger deployment" if step.escalate else ""
            course.steps.append(f"{step.step}: {step.size} {step.modality}(s){where}")
            ctx.event("adaptive", f"unsettled after {len(ballots)}: {course.steps[-1]}")
            ballots += await self._draw(ctx, voter, programs, step.modality, step.size, decimals,
                                        first=False, on=ctx.escalation if step.escalate else None)  # fmt: skip
            reason = policy.settled(self._view(ballots), self.confidence, start=self.start)
        course.stopped = reason
        log = [f"first wave: {self.first_wave} {self.start}(s)", *course.steps]
        node.text = f"{'; '.join(log)}; stopped: {reason} after {len(ballots)} candidate(s)"
        node.visits = len(ballots)
        ctx.event("adaptive", f"stopped ({reason}) after {len(ballots)} of at most {self.n} candidate(s)")
        ctx.early_stop_saved += max(0, self.n - len(ballots))
        thoughts = [b for b in ballots if b.thought]
        if thoughts and not any(b.key for b in ballots):
            outcome = self._prose(ctx, thoughts[0])  # nothing to vote on: the greedy chain of thought answers
        else:
            outcome = await self._voter(len(thoughts)).decide(ctx, ballots, 0)
        node.score = outcome.choice.score if outcome.choice is not None else 0.0
        return outcome

    @staticmethod
    def _prose(ctx: Context, thought: Ballot) -> Outcome:
        """The first chain of thought as the answer, where no candidate stated a value to vote on
        (open prose): there is no vote, so no confidence signals."""
        generated = thought.generated
        choice = Choice(
            text=generated.text, node_id=generated.node.id, finish_reason=generated.candidate.finish_reason,
            answer_tokens=generated.candidate.completion_tokens, score=1.0, votes=1,
        )  # fmt: skip
        ctx.offer(choice, force=True)
        return Outcome(choice)

    def _view(self, ballots: list[Ballot]) -> list[policy.Ballot]:
        return [policy.Ballot(b.key, b.weight, "thought" if b.thought else "program") for b in ballots]

    async def _draw(
        self, ctx: Context, voter: ProgramOfThought, programs: tuple[Message, ...], modality: policy.Modality,
        size: int, decimals: int | None, *, first: bool, on: Policy | None = None,
    ) -> list[Ballot]:  # fmt: skip
        """``size`` ballots of ``modality`` (on the deployment ``on`` when given); the first wave's
        first candidate is greedy."""
        own = ctx.policy
        if on is not None:
            ctx.policy = on
        try:
            if modality == "program":
                return await voter.draw_wave(ctx, programs, size, 0, first=first, decimals=decimals)
            thoughts = await self._thoughts(ctx, size, first=first)
            return [voter.thought_ballot(g, decimals) for g in thoughts]
        finally:
            ctx.policy = own

    async def _thoughts(self, ctx: Context, size: int, *, first: bool) -> list[Generated]:
        root = ctx.trace.root.id
        drawn: list[Generated] = []
        if first and size:
            drawn += await ctx.generate(1, parent_id=root, temperature=0.0, offer=False)
            size -= 1
        if size:
            drawn += await ctx.generate(size, parent_id=root, offer=False)
        return drawn
