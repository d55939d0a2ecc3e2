"""Self-consistency (normalized majority vote) and verifier-weighted voting.

Candidates are clustered by their vote key (:mod:`~.keys`): the normalized answer
(:func:`services.common.answers.normalize_for_vote`), so ``1,000``, ``1000.0`` and
``\\boxed{1000}`` vote together; the normalized tool calls of a candidate that calls tools;
canonical JSON under a response format. Candidates without a key (no extractable answer, a
call that does not validate against its tool's schema) do not vote (unless no candidate has one).

Ties are broken, in order, by: (1) the cluster's total weight (count, or summed verifier
score); (2) the higher mean token log-probability of the cluster's members, when the
engine returned log-probabilities for them; (3) the cluster whose first member came
earliest. The returned text is the cluster's first member that finished with ``stop``
(else its first member).

A vote of one sample (``n`` = 1, one answer) keeps that sample's text as it is, so where the
job streams its answer the sample streams as the answer while it is decoded, as ``single``'s
does; otherwise the samples stream as reasoning and the winner is the answer once chosen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from services.common.answers import requested_decimals
from services.search.interfaces import Candidate
from services.search.params import Params
from services.search.strategies.base import Strategy
from services.search.strategies.config import StrategyInput, read_n
from services.search.strategies.context import Context, Generated
from services.search.strategies.results import Choice, Outcome
from services.search.strategies.signals import SC, WVOTE, vote_signals
from services.search.strategies.stopping import should_stop, wave_sizes
from services.search.strategies.text import question_text, safe_mean
from services.search.strategies.verifier_choice import VerifierChoice, read_verifier


@dataclass(frozen=True)
class Cluster:
    key: str
    members: tuple[int, ...]
    weight: float
    mean_logprob: float | None


def clusters(keys: Sequence[str], weights: Sequence[float], candidates: Sequence[Candidate]) -> list[Cluster]:
    """Group candidate indices by vote key, in order of first appearance."""
    order: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        order.setdefault(key, []).append(i)
    result = []
    for key, members in order.items():
        lps = [candidates[i].mean_logprob for i in members]
        known = [lp for lp in lps if lp is not None]
        result.append(
            Cluster(
                key=key,
                members=tuple(members),
                weight=sum(weights[i] for i in members),
                mean_logprob=safe_mean(known) if known else None,
            )
        )
    return result


def ranked(keys: Sequence[str], weights: Sequence[float], candidates: Sequence[Candidate]) -> list[Cluster]:
    """Every cluster, best first under the documented tie-break; clusters without a key come
    last (they vote only when no candidate has a key)."""
    groups = clusters(keys, weights, candidates)
    voting = [c for c in groups if c.key] or groups
    use_logprobs = all(c.mean_logprob is not None for c in voting)

    def rank(c: Cluster) -> tuple[bool, float, float, int]:
        lp = c.mean_logprob if use_logprobs and c.mean_logprob is not None else 0.0
        return (c in voting, round(c.weight, 12), lp, -c.members[0])

    return sorted(groups, key=rank, reverse=True)


def vote(keys: Sequence[str], weights: Sequence[float], candidates: Sequence[Candidate]) -> Cluster | None:
    """The winning cluster under the documented tie-break, ``None`` when there are no candidates."""
    order = ranked(keys, weights, candidates)
    return order[0] if order else None


def ranking(order: Sequence[Cluster], generated: Sequence[Generated], scores: Sequence[float] | None) -> list[Choice]:
    """The answers of ``order`` best first: each cluster's representative (with its votes and,
    when a verifier scored them, its members' mean score), then the clusters' other members in
    the same order."""
    first: list[Choice] = []
    rest: list[Choice] = []
    for cluster in order:
        chosen = representative(cluster, generated)
        score = safe_mean([scores[i] for i in cluster.members]) if scores is not None else 0.0
        for i in cluster.members:
            choice = generated[i].choice(votes=len(cluster.members), score=score, scored=scores is not None)
            (first if generated[i] is chosen else rest).append(choice)
    return first + rest


def tally(order: Sequence[Cluster], total: int, shown: int = 5) -> str:
    """A vote's event line: the clusters best first, each with its votes (and weight when it
    differs), the first ``shown`` of them."""
    parts = []
    for c in order[:shown]:
        votes = len(c.members)
        weight = f" (weight {c.weight:.2f})" if abs(c.weight - votes) > 1e-9 else ""
        parts.append(f"{c.key[:80] or '(no answer)'!r}: {votes}{weight}")
    more = f", {len(order) - shown} more" if len(order) > shown else ""
    return f"tally of {total}: " + ", ".join(parts) + more


def representative(cluster: Cluster, generated: Sequence[Generated]) -> Generated:
    for i in cluster.members:
        if generated[i].candidate.finish_reason == "stop":
            return generated[i]
    return generated[cluster.members[0]]


async def _vote_and_choose(
    ctx: Context,
    generated: list[Generated],
    weights: list[float],
    scores: list[float] | None,
    passed: list[bool] | None,
    stage: str,
    decimals: int | None = None,
    family: str = SC,
) -> Outcome:
    candidates = [g.candidate for g in generated]
    keys = [ctx.keys.key(c, decimals=decimals) for c in candidates]
    order = ranked(keys, weights, candidates)
    if not order:
        return Outcome(None)
    winner = order[0]
    chosen = representative(winner, generated)
    chosen_index = generated.index(chosen)
    total = sum(weights) or 1.0
    ctx.ranking = ranking(order, generated, scores)
    ctx.trace.add(ctx.trace.root.id, "vote", text=winner.key, score=winner.weight / total, visits=len(winner.members))
    ctx.event(stage, tally(order, len(generated)))
    score = safe_mean([scores[i] for i in winner.members]) if scores is not None else winner.weight / total
    choice = chosen.choice(
        score=score,
        passed=passed[chosen_index] if passed is not None else False,
        scored=scores is not None,
        votes=len(winner.members),
    )
    judge = score if scores is not None and winner.key else None
    choice.signals = vote_signals(family, keys, weights, winner.key, judge_score=judge)
    ctx.offer(choice, force=True)
    return Outcome(choice)


@dataclass(frozen=True)
class SelfConsistency(Strategy):
    """Majority vote over ``n`` samples. With ``params.early_stop`` it draws in waves
    (``first_wave``, then doubling) and stops once the vote is settled
    (:mod:`services.search.strategies.stopping`, threshold ``confidence``)."""

    name: ClassVar[str] = "self_consistency"
    n: int = 8
    logprobs: bool = True
    early_stop: bool = False
    confidence: float = 0.9
    first_wave: int = 3

    @classmethod
    def from_input(cls, spec: StrategyInput) -> SelfConsistency:
        n = read_n(spec, 8, minimum=1)
        params = Params(spec.params)
        strategy = cls(
            n=n,
            logprobs=params.boolean("logprobs", True),
            early_stop=params.boolean("early_stop", False),
            confidence=params.number("confidence", 0.9, minimum=0.5, maximum=1.0),
            first_wave=params.integer("first_wave", 3, minimum=1, maximum=256),
        )
        params.finish()
        return strategy

    async def run(self, ctx: Context) -> Outcome:
        answer = ctx.answer.sole(self.n)
        if not self.early_stop:
            generated = await ctx.generate(self.n, parent_id=ctx.trace.root.id, logprobs=self.logprobs, on_text=answer)
            return await _vote_and_choose(ctx, generated, [1.0] * len(generated), None, None, "vote")
        decimals = requested_decimals(question_text(ctx.problem))
        generated = []
        for size in wave_sizes(self.n, self.first_wave):
            generated += await ctx.generate(size, parent_id=ctx.trace.root.id, logprobs=self.logprobs, on_text=answer)
            left = self.n - len(generated)
            if left <= 0:
                break
            votes = Counter(ctx.keys.key(g.candidate, decimals=decimals) for g in generated)
            decision = should_stop(votes, float(left), self.confidence)
            if decision.stop:
                ctx.early_stop_saved += left
                ctx.event("vote", f"stopped early ({decision.reason}): {left} sample(s) not drawn")
                break
        return await _vote_and_choose(ctx, generated, [1.0] * len(generated), None, None, "vote", decimals)


@dataclass(frozen=True)
class WeightedVote(Strategy):
    """Each cluster's weight is the sum of its members' verifier scores."""

    name: ClassVar[str] = "weighted_vote"
    n: int
    verifier: VerifierChoice

    @classmethod
    def from_input(cls, spec: StrategyInput) -> WeightedVote:
        n = read_n(spec, 8, minimum=1)
        params = Params(spec.params)
        verifier = read_verifier(spec, params, default="orm")
        params.finish()
        return cls(n=n, verifier=verifier)

    async def run(self, ctx: Context) -> Outcome:
        answer = ctx.answer.sole(self.n)
        generated = await ctx.generate(self.n, parent_id=ctx.trace.root.id, logprobs=True, on_text=answer)
        if not generated:
            return Outcome(None)
        verdicts = await ctx.verify(self.verifier, [g.shown for g in generated], [g.node.id for g in generated])
        scores = [v.score for v in verdicts]
        outcome = await _vote_and_choose(
            ctx, generated, scores, scores, [v.passed for v in verdicts], "vote", family=WVOTE
        )
        if outcome.choice is not None and self.verifier.hard and outcome.choice.passed:
            return Outcome(outcome.choice, "solved")
        return outcome
