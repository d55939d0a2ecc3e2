"""``problems``: the problem set per split, family and task kind, and the check that the splits
are disjoint (no shared id or question; every problem on its hashed side)."""

from __future__ import annotations

import argparse
import collections

from calibration.lib.arguments import add_problem_set_arguments
from evaluation.problems.datasets import split_key
from evaluation.problems.problemset import build_problem_set, check_disjoint, family_names, family_of

NAME = "problems"
HELP = "the problem set per split; checks disjointness"


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_problem_set_arguments(p)


def run(a: argparse.Namespace) -> int:
    sets = {s: build_problem_set(split_key(s), per_family=a.per_family, seed=a.seed, families=family_names(a.families))
            for s in ("calibration", "development")}  # fmt: skip
    check_disjoint(sets["calibration"], sets["development"])
    for split, problems in sets.items():
        by = collections.Counter((family_of(p).kind, p.dataset) for p in problems)
        kinds = sorted({k for k, _ in by})
        print(f"{split}: {len(problems)} problems, {len(by)} families, {len(kinds)} task kinds")
        for (kind, family), count in sorted(by.items()):
            print(f"  {kind:<11} {family:<20} {count}")
    print("disjoint: no shared id or question; every problem on its hashed side")
    return 0
