"""Replay the adaptive vote on a problem's pool, draw by draw, as the strategy would draw (pure).

The served strategy (:mod:`services.search.strategies.adaptive`) decides when it is settled and
what it draws next with :mod:`services.search.strategies.adaptive_policy`; this replay calls the
same two functions on the pool's recorded candidates in the order the strategy would draw them:

- a program first wave is the greedy program, then sampled programs; a chain-of-thought first wave
  the greedy chain of thought, then sampled ones;
- every later step draws the next sampled candidates of its modality (never a greedy one: the
  strategy draws later waves at the job's temperature);
- the answer is the weighted vote over every ballot drawn, ties to the earliest (the strategy's
  ``ProgramOfThought.decide``); where no ballot has a key, the first chain of thought answers;
- an ``escalate`` step draws the next sampled candidates of the starting modality from the larger
  model's pool of the same problem (``large``), weighted as the small model's are, as the served
  step draws them on the escalation deployment; without ``large`` the step is skipped, as it is
  where no larger deployment is served.

A pool holds a greedy and ``k`` sampled candidates per modality. Where a step wants more than the
pool has left, it draws what is left (the replay of a cap above the pool's size is a lower bound
on what the served route spends); :attr:`Replayed.exhausted` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evaluation.pools.store import PoolCandidate
from services.search.strategies import adaptive_policy as policy


@dataclass(frozen=True)
class AdaptiveSpec:
    """An adaptive route as priced: the cap ``n`` and the policy's parameters."""

    n: int
    start: policy.Modality = "program"
    first_wave: int = 2
    steps: tuple[str, ...] = ("other", "more")
    confidence: float = 0.9
    thought_weight: float = 0.5


@dataclass(frozen=True)
class Step:
    """One engine call of the replay: its modality, the candidates it drew, and whether it ran on
    the larger model."""

    modality: policy.Modality
    drawn: tuple[PoolCandidate, ...]
    escalated: bool = False


@dataclass(frozen=True)
class Replayed:
    """One replayed run: right or not, the calls in order, why it stopped, and whether the first
    wave alone settled it."""

    correct: bool
    steps: tuple[Step, ...]
    reason: str
    first_wave_settled: bool
    exhausted: bool

    @property
    def candidates(self) -> int:
        return sum(len(s.drawn) for s in self.steps)

    @property
    def generated(self) -> int:
        return sum(c.completion_tokens for s in self.steps for c in s.drawn)


@dataclass
class _Source:
    """A modality's candidates in draw order: its greedy one (first waves only), then sampled."""

    greedy: PoolCandidate | None
    sampled: Sequence[PoolCandidate]
    at: int = 0

    def take(self, size: int, *, first: bool) -> list[PoolCandidate]:
        drawn: list[PoolCandidate] = []
        if first and self.greedy is not None and size > 0:
            drawn.append(self.greedy)
            size -= 1
        taken = list(self.sampled[self.at : self.at + size])
        self.at += len(taken)
        return drawn + taken


def replay(
    spec: AdaptiveSpec,
    programs: tuple[PoolCandidate | None, Sequence[PoolCandidate]],
    thoughts: tuple[PoolCandidate | None, Sequence[PoolCandidate]],
    large: Mapping[policy.Modality, Sequence[PoolCandidate]] | None = None,
) -> Replayed:
    """The adaptive vote on one ordering of a pool: ``programs`` and ``thoughts`` are each a
    (greedy, sampled in draw order) pair; ``large``: the larger model's sampled candidates of the
    same problem per modality, in draw order, where the route may escalate to it."""
    sources = {"program": _Source(*programs), "thought": _Source(*thoughts)}
    escalation = {m: _Source(None, c) for m, c in (large or {}).items()}
    weights = {"program": 1.0, "thought": spec.thought_weight}
    ballots: list[tuple[PoolCandidate, policy.Ballot]] = []
    steps: list[Step] = []
    exhausted = False

    def draw(modality: policy.Modality, size: int, *, first: bool, escalate: bool = False) -> None:
        nonlocal exhausted
        source = escalation.get(modality, _Source(None, ())) if escalate else sources[modality]
        drawn = source.take(size, first=first)
        exhausted = exhausted or len(drawn) < size
        if drawn:
            steps.append(Step(modality, tuple(drawn), escalate))
        ballots.extend((c, policy.Ballot(c.key, weights[modality], modality)) for c in drawn)

    draw(spec.start, spec.first_wave, first=True)
    reason = policy.settled([b for _, b in ballots], spec.confidence, start=spec.start)
    first_wave_settled = bool(reason)
    index = 0
    while not reason:
        step = policy.next_step(index, len(ballots), spec.n, spec.steps, spec.start, can_escalate=large is not None)
        if step is None:
            reason = "cap"
            break
        index += 1
        before = len(ballots)
        draw(step.modality, step.size, first=False, escalate=step.escalate)
        if len(ballots) == before:  # this modality's pool is spent: the served route would draw on
            reason = "pool"
            break
        reason = policy.settled([b for _, b in ballots], spec.confidence, start=spec.start)
    return Replayed(_correct(ballots), tuple(steps), reason, first_wave_settled, exhausted)


def _correct(ballots: Sequence[tuple[PoolCandidate, policy.Ballot]]) -> bool:
    """Whether the weighted vote's winner (ties: the earliest) is right; with no key at all, the
    first chain of thought's answer."""
    votes: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, (_, ballot) in enumerate(ballots):
        if ballot.key:
            votes[ballot.key] = votes.get(ballot.key, 0.0) + ballot.weight
            first.setdefault(ballot.key, i)
    if not votes:
        thought = next((c for c, b in ballots if b.modality == "thought"), None)
        return bool(thought is not None and thought.correct)
    winner = max(votes, key=lambda k: (round(votes[k], 12), -first[k]))
    return bool(ballots[first[winner]][0].correct)
