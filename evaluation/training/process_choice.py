"""Which chains of thought get process labels: per problem of the calibration split at most one
verified-right and one verified-wrong chain of thought from the pools.

The candidates are the export's (:func:`~evaluation.training.trajectories.pool_trajectories`):
no development or sealed problem (by content hash and by the split function, whichever split a
pool claims), outcome labels from the problem's own checker only, never a judge's score. Of a
problem's chains of thought the first right one is chosen, and the wrong one most worth labelling
step by step: a complete answer with a wrong value first (its value should fall at its first
wrong step), then one that states no usable answer, then one cut at ``max_tokens``. A chain that
is one step has no prefix to label and is left out.

The order is round-robin over families (a problem's right chain, then its wrong one), so the
first ``n`` chosen cover every family: a run capped at ``n`` candidates, or stopped early, is a
sample of the whole set.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evaluation.pools.store import ProblemPool
from evaluation.problems.datasets import Problem
from evaluation.training.process_steps import split_steps
from evaluation.training.trajectories import Trajectory, pool_trajectories
from evaluation.training.withheld import Withheld

#: the wrong chain chosen first, by its failure kind (any other kind is not chosen)
WRONG_ORDER = ("wrong_value", "wrong_form", "cut")
NO_CHAIN = "problems: no verified chain of thought"
ONE_STEP = "candidates: one step only"


@dataclass(frozen=True)
class Chosen:
    """A chain of thought to label: the trajectory (prompt, completion, outcome), its problem
    (for the checker) and the chain-of-thought token cap of the pool that drew it (``None``:
    the pool does not say)."""

    trajectory: Trajectory
    problem: Problem
    max_tokens: int | None

    @property
    def candidate_id(self) -> str:
        return self.trajectory.candidate.candidate_id


def _wrong_rank(trajectory: Trajectory) -> int:
    failure = trajectory.outcome.failure or ""
    return WRONG_ORDER.index(failure) if failure in WRONG_ORDER else len(WRONG_ORDER)


def _pick(chains: Sequence[Trajectory]) -> list[Trajectory]:
    """The first right chain and the wrong one most worth labelling (module docstring)."""
    right = [t for t in chains if t.outcome.label]
    wrong = sorted((t for t in chains if not t.outcome.label), key=_wrong_rank)  # stable: pool order
    picked = right[:1]
    if wrong and _wrong_rank(wrong[0]) < len(WRONG_ORDER):
        picked.append(wrong[0])
    return picked


def interleaved(groups: Iterable[tuple[str, list[Chosen]]]) -> list[Chosen]:
    """Groups of ``(family, chosen)`` round-robin over families, each group kept together."""
    by_family: dict[str, list[list[Chosen]]] = {}
    for family, group in groups:
        by_family.setdefault(family, []).append(group)
    rounds = itertools.zip_longest(*by_family.values())
    return [c for round_ in rounds for group in round_ if group is not None for c in group]


def choose(
    pools: Iterable[tuple[ProblemPool, str, int | None]], withheld: Withheld, left_out: Counter[str]
) -> list[Chosen]:
    """The chains to label from ``(pool, model, chain-of-thought cap)`` triples, in the order of
    the module docstring; what is left out is counted in ``left_out`` (problems withheld,
    problems without a verified chain of thought, chains of one step)."""
    groups: list[tuple[str, list[Chosen]]] = []
    for pool, model, cap in pools:
        counted: Counter[str] = Counter()  # the export's counts; only its problems' are this run's
        found = pool_trajectories([(pool, model)], withheld, counted)
        left_out.update({why: n for why, n in counted.items() if why.startswith("problems:")})
        if any(why.startswith("problems:") for why in counted):
            continue
        candidates = _pick([t for t in found if t.candidate.modality == "cot"])
        if not candidates:
            left_out[NO_CHAIN] += 1  # a code problem too: it has no chain of thought
            continue
        problem = Problem.from_dict(pool.problem)
        picked = [Chosen(t, problem, cap) for t in candidates if len(split_steps(t.completion)) >= 2]
        if len(picked) < len(candidates):
            left_out[ONE_STEP] += len(candidates) - len(picked)
        if picked:
            groups.append((pool.family, picked))
    return interleaved(groups)
