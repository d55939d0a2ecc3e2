"""Cascade: the small model's vote first, a larger deployment only when that vote is not settled.

A larger model is right more often on some tasks (long products, equations) and no
better on others, at about three times the cost per token on 2 cores. The cascade spends that
cost only where the cheap vote shows doubt: it runs an inner voting strategy (program-of-thought
by default, or self-consistency) on the job's model, and when the small vote's calibrated
confidence (the number the reply reports as ``ttc.confidence``: ``services/common/confidence.py``,
from the vote's signals, abstaining programs counting against the winner) is below ``threshold``,
or the vote has no confidence (no program produced an answer), it runs the same inner strategy
again on the escalation deployment, whose answer is returned. Both runs spend the one job budget,
so usage counts both models' tokens, and the trace has an ``escalate`` (or ``settled``) node
whose score is the small vote's confidence. The small vote never streams as the answer, even a
vote of one sample (``AnswerStream.provisional``): the larger model may replace it.

Params: ``inner`` (``program_of_thought`` or ``self_consistency``), ``threshold`` (0..1, default
0.75: a probability, not a share, and it depends on the prompt: one agreeing greedy program is
about 0.95 on a multiplication and 0.21 on a leg count, docs/confidence.md), and the inner
strategy's own params. What runs
on the escalation deployment (default: the inner strategy again, with its params and the job's
``n``) can differ, so every pair ``python -m calibration escalation`` prices is servable:

- ``large_inner``: ``program_of_thought``, ``self_consistency`` or ``single`` (the larger model
  writes chains of thought better than its programs on some families: one greedy chain of
  thought, ``single`` with ``large_params: {"greedy": true}``, is the priced ``cot_greedy``);
- ``large_n``: that strategy's ``n`` (``single`` takes 1);
- ``large_params``: that strategy's own params, validated by it (errors name
  ``strategy.params.large_params.<key>``); default the inner params when ``large_inner`` is the
  inner strategy, none otherwise.

The threshold is compared with the answer's served confidence: the vote's signals, the prompt's
task type and its prior (docs/confidence.md), computed in the worker from the same text the
gateway routed by. Because the prior is known before anything is generated, the small run is
skipped when even a unanimous vote of it would fall below the threshold (a prompt of a kind the
small model is almost never right on): the trace's ``escalate`` node says so, with that
ceiling as its score, and only the larger model's tokens are spent.

The escalation deployment is the worker's (``TTC_ORCHESTRATOR_ESCALATION_MODEL``): a request
pins ``cascade`` but cannot name arbitrary models behind the gateway's back. Where it is unset
the cascade is refused (a job error with code INVALID_ARGUMENT: a 400 at the gateway), never
run silently without escalating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from services.common.confidence import ConfidenceSignals
from services.common.errors import ServiceError
from services.search.budget import ComponentFailed
from services.search.interfaces import Message
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput
from services.search.strategies.context import Context
from services.search.strategies.program import ProgramOfThought
from services.search.strategies.results import Outcome
from services.search.strategies.signals import HYBRID, POT, SC, answer_confidence, unanimous
from services.search.strategies.single import Single
from services.search.strategies.voting import SelfConsistency

INNER: dict[str, type[Strategy]] = {"program_of_thought": ProgramOfThought, "self_consistency": SelfConsistency}
LARGE: dict[str, type[Strategy]] = {**INNER, "single": Single}
OWN_PARAMS = ("inner", "threshold", "large_inner", "large_n", "large_params")


def small_confidence(outcome: Outcome, problem: Sequence[Message]) -> float | None:
    """The calibrated confidence of ``outcome``'s answer to ``problem``; ``None`` without an
    answer or signals."""
    return answer_confidence(outcome.choice.signals, problem) if outcome.choice is not None else None


def best_case(inner: Strategy) -> ConfidenceSignals:
    """The signals of the most agreeing vote ``inner`` can return: every ballot it may draw
    agreeing (programs and, for the hybrid, its chains of thought; or every sample)."""
    if isinstance(inner, ProgramOfThought):
        return unanimous(HYBRID if inner.cot > 0 else POT, inner.n + inner.cot, inner.cot)
    if isinstance(inner, SelfConsistency):
        return unanimous(SC, inner.n)
    raise TypeError(f"cascade: no vote to bound for {type(inner).__name__}")


def vote_share(outcome: Outcome, drawn: int) -> float:
    """The chosen answer's votes over every candidate the run drew (0 when nothing answered)."""
    if outcome.choice is None or drawn <= 0:
        return 0.0
    return min(1.0, max(outcome.choice.votes, 0) / drawn)


def _large_strategy(kind: type[Strategy], spec: StrategyInput) -> Strategy:
    """The escalation deployment's strategy; its parameter errors name ``large_params``'s field."""
    try:
        return kind.from_input(spec)
    except ServiceError as exc:
        if exc.field.startswith("strategy.params."):
            exc.field = "strategy.params.large_params." + exc.field.removeprefix("strategy.params.")
        raise


@dataclass(frozen=True)
class Cascade(Strategy):
    name: ClassVar[str] = "cascade"
    inner: Strategy
    threshold: float = 0.75
    large: Strategy | None = None  # the vote run on the escalation deployment (default: ``inner``)

    @classmethod
    def from_input(cls, spec: StrategyInput) -> Cascade:
        params = Params(spec.params)
        inner_name = params.string("inner", "program_of_thought", choices=tuple(INNER))
        threshold = params.number("threshold", 0.75, minimum=0.0, maximum=1.0)
        inner_params = {k: v for k, v in spec.params.items() if k not in OWN_PARAMS}
        inner = INNER[inner_name].from_input(replace(spec, params=inner_params))
        large_name = params.string("large_inner", inner_name, choices=tuple(LARGE))
        large_params = params.mapping("large_params")
        large = None
        if any(key in spec.params for key in ("large_inner", "large_n", "large_params")):
            large_n = params.integer("large_n", 1 if large_name == "single" else spec.n, minimum=1, maximum=64)
            own = inner_params if large_name == inner_name else {}
            large = _large_strategy(LARGE[large_name], replace(spec, n=large_n, params=dict(
                own if large_params is None else large_params)))  # fmt: skip
        return cls(inner=inner, threshold=threshold, large=large)

    async def run(self, ctx: Context) -> Outcome:
        if ctx.escalation is None:
            raise ComponentFailed(
                "cascade needs an escalation deployment: set TTC_ORCHESTRATOR_ESCALATION_MODEL on the workers",
                component="orchestrator",
                code="INVALID_ARGUMENT",
            )
        ceiling = answer_confidence(best_case(self.inner), ctx.problem)
        if ceiling is not None and ceiling < self.threshold:
            # The prompt alone says the small model cannot settle it (its prior is low): even a
            # unanimous vote would escalate, so its tokens would only be spent on top.
            node = ctx.trace.add(
                ctx.trace.root.id,
                "escalate",
                text=f"small model skipped: a unanimous vote would have confidence {ceiling:.2f} "
                f"(threshold {self.threshold:.2f})",
                score=ceiling,
            )
            ctx.event(
                "cascade",
                f"even a unanimous small vote would be {ceiling:.2f} < {self.threshold:.2f}: "
                "straight to the larger model",
            )
            large = await self._escalate(ctx)
            node.visits = 1
            return large
        before = ctx.candidates_generated
        with ctx.answer.provisional():  # the larger model may replace it: nothing of it streams as the answer
            small = await self.inner.run(ctx)
        share = vote_share(small, ctx.candidates_generated - before)
        confidence = small_confidence(small, ctx.problem)
        settled = small.choice is not None and confidence is not None and confidence >= self.threshold
        shown = "none" if confidence is None else f"{confidence:.2f}"
        node = ctx.trace.add(
            ctx.trace.root.id,
            "escalate" if not settled else "settled",
            text=f"small model's confidence {shown} (vote share {share:.2f}; threshold {self.threshold:.2f})",
            score=confidence or 0.0,
        )
        if settled:
            ctx.event("cascade", f"the small model's vote settled it (confidence {shown}, share {share:.2f})")
            return small
        ctx.event(
            "cascade", f"confidence {shown} < {self.threshold:.2f} (share {share:.2f}): escalating to the larger model"
        )
        large = await self._escalate(ctx)
        node.visits = 1
        return large if large.choice is not None else small

    async def _escalate(self, ctx: Context) -> Outcome:
        """The larger model's vote: the same context, its policy the escalation deployment's."""
        assert ctx.escalation is not None  # run() refuses a cascade without one
        own_policy = ctx.policy
        ctx.policy = ctx.escalation
        try:
            return await (self.large or self.inner).run(ctx)
        finally:
            ctx.policy = own_policy
