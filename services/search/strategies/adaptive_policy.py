"""When an adaptive vote is settled, and what it draws next (pure: ballots in, a decision out).

The adaptive strategy (:mod:`~services.search.strategies.adaptive`) and its offline replay on
calibration pools (:mod:`evaluation.pricing.adaptive`) both decide through these functions, so the
fitted thresholds mean on a live request what they meant in the replay.

A vote is *settled* when one of these holds:

- ``agreed``: at least two ballots answered, every ballot answered (no program crashed, timed
  out or printed a literal it did not compute) and all answers are the same. A first wave of two
  agreeing programs stops here, at every effort;
- ``confident``: the leader's posterior probability of being the majority answer
  (:func:`~services.search.strategies.stopping.leader_probability`), counting every abstention
  against it (as a vote for the runner-up), reaches the effort's ``confidence``;
- ``open``: chains of thought were drawn and no candidate at all stated an extractable answer
  (the programs abstained too): open prose, on which nothing can vote, so more samples cannot
  settle it.

Otherwise the next step is taken, in the route's order, each step drawing as many candidates as
were drawn so far (the spend doubles per step), until the effort's candidate cap is spent:

- ``more``: more candidates of the starting modality;
- ``other``: the other modality (chains of thought when programs disagree or fail; programs when
  a chain-of-thought vote is split, since the question may be computable though no rule saw it);
- ``escalate``: the starting modality on the larger deployment, when one is served (skipped
  otherwise).

Once the order is used up its last step repeats. A higher effort differs from a lower one only by
a larger cap and a confidence at least as high, with the same first wave, order and weights: on
the same candidates it never stops earlier, so the ladder is monotone by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from services.search.strategies.stopping import leader_probability

Modality = Literal["program", "thought"]
Step = Literal["more", "other", "escalate"]
STEPS: tuple[str, ...] = ("more", "other", "escalate")
MODALITIES: tuple[str, ...] = ("program", "thought")


@dataclass(frozen=True)
class Ballot:
    """One candidate's vote as the policy sees it: its key ("" abstains), weight and modality."""

    key: str
    weight: float
    modality: Modality


def settled(ballots: Sequence[Ballot], confidence: float, *, start: Modality) -> str:
    """Why the vote is settled (``agreed``, ``confident`` or ``open``), ``""`` while it is not."""
    answered = [b for b in ballots if b.key]
    if not answered:
        thoughts = any(b.modality == "thought" for b in ballots)
        return "open" if thoughts else ""
    if len(answered) >= 2 and len(answered) == len(ballots) and len({b.key for b in answered}) == 1:
        return "agreed"
    votes: dict[str, float] = {}
    for ballot in answered:
        votes[ballot.key] = votes.get(ballot.key, 0.0) + ballot.weight
    ranked = sorted(votes.values(), reverse=True)
    abstained = sum(b.weight for b in ballots if not b.key)
    runner_up = (ranked[1] if len(ranked) > 1 else 0.0) + abstained
    if len(answered) >= 2 and leader_probability(ranked[0], runner_up) >= confidence:
        return "confident"
    return ""


def other(modality: Modality) -> Modality:
    return "thought" if modality == "program" else "program"


@dataclass(frozen=True)
class NextStep:
    """What to draw next: ``size`` candidates of ``modality``, on the larger deployment when
    ``escalate``; ``step`` names the rule that chose it."""

    step: Step
    modality: Modality
    size: int
    escalate: bool = False


def next_step(
    index: int, drawn: int, cap: int, order: Sequence[str], start: Modality, *, can_escalate: bool
) -> NextStep | None:
    """The ``index``-th step after the first wave (0-based), given ``drawn`` candidates so far and
    the effort's ``cap``; ``None`` when the cap is spent or no step can run."""
    room = cap - drawn
    if room <= 0 or not order:
        return None
    usable = [s for s in order if s != "escalate" or can_escalate]
    if not usable:
        return None
    step = usable[min(index, len(usable) - 1)]
    size = min(max(1, drawn), room)
    if step == "other":
        return NextStep("other", other(start), size)
    if step == "escalate":
        return NextStep("escalate", start, size, escalate=True)
    return NextStep("more", start, size)


def parse_order(text: str) -> tuple[str, ...]:
    """A route's step order from its comma-separated spelling (``"other,more"``); raises
    ``ValueError`` naming an unknown step."""
    steps = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise ValueError(f"unknown step(s) {', '.join(unknown)}; known: {', '.join(STEPS)}")
    return steps
