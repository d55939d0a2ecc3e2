"""Which configuration each effort routes to, chosen so that noise does not pick it: a ladder
that never steps down on problems the fit never saw and stays within 3 points of the best fixed
configuration.

The plain rule (the best mean accuracy within the budget, ties to fewer tokens) is a maximum
over many noisy means: on a group of four calibration problems, one lucky configuration wins,
the next effort's maximum is another lucky one, and on development problems the ladder steps down
where calibration said it climbed. Two guards, both a paired comparison on the group's own
problems:

- **Shrink to the parent.** A group with a parent (a task type's bin under the task type, a
  task type under the across-family default) starts each effort from the parent's choice, and
  leaves it only for a configuration that beats it by a paired margin on the group's problems.
  Few problems rarely clear the margin, so a small group inherits the pooled decision.
- **Climb, never fall.** Each effort starts from the previous effort's choice (it fits the
  larger budget: budgets never fall) and leaves it only for a configuration that beats it by
  the same margin. So calibration's ladder never steps down, and it steps up only where the
  data say it pays.

A configuration that is no worse on every problem and cheaper on average (it dominates) needs
no margin: taking it costs nothing on these problems.

Both comparisons read only measurements. A configuration measured on a subset (a live tree
strategy, a cascade onto a larger model: :mod:`~.live_join`) carries imputed figures elsewhere,
each its group's mean difference again; counted as evidence they would shrink the standard
error without adding any. So the problems where either side is imputed (``guessed``) are left
out of the margin; dominance still asks "no worse" on every problem, imputed ones included, and
two measured ones at least. So a configuration needs two measured problems to move a route.

The margin is one-sided: the mean paired difference must exceed ``z`` standard errors (and be
positive). With ``z = 0`` this is the plain rule restricted to improvements. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set

import numpy as np

from evaluation.routing.types import Choice, ProblemStats

DEFAULT_Z = 1.0  # one standard error: about 84% one-sided, loose enough to move on 10+ problems
Guessed = Mapping[str, Set[str]]  # configuration -> problems whose figures are imputed, not measured


def effort_budgets(
    stats: Sequence[ProblemStats], single_label: str, multiples: Mapping[str, float]
) -> dict[str, float]:
    """Budgets in mean tokens per request: multiples of the measured single-sample cost."""
    costs = [s.configs[single_label].tokens for s in stats if single_label in s.configs]
    if not costs:
        raise ValueError(f"no measurements of the single-sample configuration {single_label!r} to scale budgets")
    base = float(np.mean(costs))
    return {effort: base * m for effort, m in multiples.items()}


def best(stats: Sequence[ProblemStats], configs: Sequence[str], budget: float) -> Choice:
    """The plain rule: the configuration with the best mean accuracy on ``stats`` whose mean cost
    fits ``budget`` (ties to fewer tokens); the cheapest when none fits. The route fit starts
    from it and :func:`choose_stable` guards it against noise; the development ladder applies it
    to the development problems for the best fixed configuration within an effort's budget."""
    top: Choice | None = None
    cheapest: Choice | None = None
    for config in configs:
        measured = [s.configs[config] for s in stats if config in s.configs]
        if not measured:
            continue
        choice = Choice(
            config, float(np.mean([m.accuracy for m in measured])), float(np.mean([m.tokens for m in measured])),
            len(measured),
        )  # fmt: skip
        if cheapest is None or choice.tokens < cheapest.tokens:
            cheapest = choice
        if choice.tokens > budget:
            continue
        if top is None or (choice.accuracy, -choice.tokens) > (top.accuracy, -top.tokens):
            top = choice
    if cheapest is None:
        raise ValueError("no configuration was measured on these problems")
    return top or cheapest  # nothing fits: the cheapest is the honest fallback


def evidence(stats: Sequence[ProblemStats], guessed: Guessed | None, *configs: str) -> list[ProblemStats]:
    """The problems on which every one of ``configs`` was measured (all of them without ``guessed``)."""
    if not guessed:
        return list(stats)
    return [s for s in stats if not any(s.problem_id in guessed.get(c, ()) for c in configs)]


def summarize(stats: Sequence[ProblemStats], config: str) -> Choice:
    """The configuration's mean accuracy and cost on ``stats`` (every one must price it)."""
    measured = [s.configs[config] for s in stats]
    return Choice(
        config, float(np.mean([m.accuracy for m in measured])), float(np.mean([m.tokens for m in measured])),
        len(measured),
    )  # fmt: skip


def beats(
    stats: Sequence[ProblemStats], challenger: str, incumbent: str, z: float = DEFAULT_Z, guessed: Guessed | None = None
) -> bool:
    """Does ``challenger`` beat ``incumbent`` on ``stats`` by more than ``z`` standard errors of
    the paired per-problem difference, on the problems both were measured on? Needs two
    problems at least (one has no spread)."""
    stats = evidence(stats, guessed, challenger, incumbent)
    if challenger == incumbent or len(stats) < 2:
        return False
    diffs = np.array([s.configs[challenger].accuracy - s.configs[incumbent].accuracy for s in stats])
    mean = float(diffs.mean())
    if mean <= 0.0:
        return False
    se = float(diffs.std(ddof=1)) / math.sqrt(len(diffs))
    return mean > z * se


def dominates(stats: Sequence[ProblemStats], challenger: str, incumbent: str, guessed: Guessed | None = None) -> bool:
    """At least as accurate as ``incumbent`` on every problem, and cheaper on average: taking it
    costs nothing on these problems, so no margin is asked. Where some figures are imputed, two
    of the problems at least must be measured for both (an imputed figure can block dominance,
    never establish it alone)."""
    measured = evidence(stats, guessed, challenger, incumbent)
    if challenger == incumbent or not measured or (len(measured) < 2 and len(measured) < len(stats)):
        return False
    no_worse = all(s.configs[challenger].accuracy >= s.configs[incumbent].accuracy for s in stats)
    return no_worse and summarize(stats, challenger).tokens < summarize(stats, incumbent).tokens


def challenge(
    stats: Sequence[ProblemStats], configs: Sequence[str], incumbent: str, budget: float, z: float = DEFAULT_Z,
    guessed: Guessed | None = None,
) -> Choice:  # fmt: skip
    """The incumbent, unless a configuration within ``budget`` beats it (:func:`beats`) or
    dominates it (:func:`dominates`); among those, the best mean accuracy (ties to fewer tokens)."""
    best = summarize(stats, incumbent)
    for config in configs:
        choice = summarize(stats, config)
        if choice.tokens > budget:
            continue
        if not (beats(stats, config, incumbent, z, guessed) or dominates(stats, config, incumbent, guessed)):
            continue
        if best.config == incumbent or (choice.accuracy, -choice.tokens) > (best.accuracy, -best.tokens):
            best = choice
    return best


def cheapest(stats: Sequence[ProblemStats], configs: Sequence[str]) -> str:
    """The configuration with the fewest mean tokens on ``stats`` (the start when no parent)."""
    return min(configs, key=lambda c: (summarize(stats, c).tokens, c))


def _takes_over(stats: Sequence[ProblemStats], inherited: str, incumbent: str, budget: float, *, first: bool) -> bool:
    """The parent's choice replaces the climbing incumbent when it fits the budget and, past the
    first effort, is no worse on these problems (so taking it never steps down)."""
    mine = summarize(stats, inherited)
    return mine.tokens <= budget and (first or mine.accuracy >= summarize(stats, incumbent).accuracy)


def choose_stable(
    stats: Sequence[ProblemStats], configs: Sequence[str], budgets: Mapping[str, float], *, start: str,
    parent: Mapping[str, str] | None = None, z: float = DEFAULT_Z, guessed: Guessed | None = None,
) -> dict[str, Choice]:  # fmt: skip
    """Per effort, in the budgets' order (which never fall): the choice among ``configs``
    (each priced on every one of ``stats``). The first effort's incumbent is ``start`` (one
    greedy sample) unless a parent choice is given; later ones the previous effort's choice.
    A parent's choice for an effort, when this group prices it and it fits the budget, is
    taken over the climbing incumbent when it is no worse on these problems than it.
    ``guessed``: per configuration, the problems whose figures are imputed (read as no evidence)."""
    out: dict[str, Choice] = {}
    incumbent = start
    for effort, budget in budgets.items():
        candidate = incumbent
        inherited = (parent or {}).get(effort)
        if (
            inherited is not None
            and inherited in configs
            and _takes_over(stats, inherited, incumbent, budget, first=not out)
        ):
            candidate = inherited
        if summarize(stats, candidate).tokens > budget and not out:
            candidate = cheapest(stats, configs)  # nothing fits the first budget: the cheapest is honest
        choice = challenge(stats, configs, candidate, budget, z, guessed)
        out[effort] = choice
        incumbent = choice.config
    return out
