"""What a run of the sealed split sends, and what it still has to send (pure).

A run sends every (problem, effort) pair once, problem by problem, each effort of a problem
after the other, so a run stopped at any point has its finished problems answered at every
effort (the paired comparisons need both sides); the problems go round-robin over the families
(:func:`interleaved`), so any prefix of a run covers every family. Before anything is sent, the problems read
must be the committed ones: their questions' hashes equal the committed list
(:func:`~evaluation.problems.sealed.sealed_hashes`), or the run is refused.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from evaluation.problems.sealed import SealedProblem, text_hash

Pair = tuple[str, str]  # (problem id, effort)


class SplitMismatch(ValueError):
    """The problems read are not the committed sealed split; nothing may be sent."""


def check_split(problems: Sequence[SealedProblem], committed: Collection[str]) -> None:
    """Refuse problems whose question hashes are not exactly the committed list."""
    hashes = [text_hash(p.question) for p in problems]
    if len(hashes) != len(committed) or set(hashes) != set(committed):
        unknown = sum(1 for h in hashes if h not in committed)
        raise SplitMismatch(
            f"the sealed problems read ({len(hashes)}, {unknown} not in the committed list) are not the committed "
            f"split ({len(committed)} question hashes): refusing to send anything"
        )


def interleaved(problems: Sequence[SealedProblem]) -> list[SealedProblem]:
    """The problems round-robin over their families (families and problems in committed order)."""
    by_family: dict[str, list[SealedProblem]] = {}
    for p in problems:
        by_family.setdefault(p.family, []).append(p)
    rounds = itertools.zip_longest(*by_family.values())
    return [p for group in rounds for p in group if p is not None]


def newest(records: Sequence[Mapping[str, Any]]) -> dict[Pair, Mapping[str, Any]]:
    """(problem, effort) -> its newest record (records oldest first, as the chunks are read)."""
    return {(str(r["problem_id"]), str(r["effort"])): r for r in records}


def answered(record: Mapping[str, Any]) -> bool:
    """Whether a record holds a grade (an infrastructure error holds none)."""
    return not record.get("error") and record.get("grade") is not None


def pending(
    problems: Sequence[SealedProblem],
    efforts: Sequence[str],
    records: Sequence[Mapping[str, Any]],
    retry_errors: bool = False,
) -> list[tuple[SealedProblem, str]]:
    """The pairs no record holds (or whose newest record is an infrastructure error, with
    ``retry_errors``), problem-major, efforts in the order given."""
    done = newest(records)

    def wanted(problem: SealedProblem, effort: str) -> bool:
        found = done.get((problem.id, effort))
        return found is None or (retry_errors and not answered(found))

    return [(p, e) for p in problems for e in efforts if wanted(p, e)]
