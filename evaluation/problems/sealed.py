"""The sealed test split: task families that no calibration, development run or tuning has seen.

A ladder fitted on some families must be judged on families it never saw, and that judgement is
worth something only if nobody chose the families or the problems by how the model does on them.
So the split is chosen by a rule written here, before any model runs on it, and committed as a
list (``docs/data/sealed/sealed_split.json``) with its seed:

1. The catalogue is reasoning-gym's list of generators, sorted by name.
2. Every family the project has already used is removed: the calibration and development
   families (:data:`~evaluation.problems.problemset.FAMILIES`) and the strategies benchmark's.
3. Families that are not self-contained questions are removed by what they are, not by how a
   model does: ``composite`` (a mixture of the others) and the ARC families (``arc_1d``,
   ``arc_agi``, ``rearc``: grids read from data files, prompts beyond the served context).
4. From what remains, every ``step``-th family is taken, ``step = len(remaining) // count``,
   starting at the first. A family whose generator fails with its default configuration, or
   whose median question is longer than :data:`MAX_QUESTION_CHARS`, is replaced by the first
   family of the remaining list that is not taken yet (mechanical, recorded in ``skipped``).
5. Each family gives ``per_family`` problems from its generator's default configuration with the
   split's seed; the reference answer and the generator's own entry (for its checker) are kept.

Nothing here runs a model; the problems' text is hashed so a later run can prove it read the same
list, and the export of training data can prove it never exported one of them.
"""

from __future__ import annotations

import hashlib
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.problems.problemset import FAMILIES

SEALED_SEED = 20261207
FAMILY_COUNT = 10
PER_FAMILY = 25
MAX_QUESTION_CHARS = 2_500
#: families used outside the calibration problem set (the strategies benchmark)
USED_ELSEWHERE = ("basic_arithmetic", "chain_sum", "gsm_symbolic")
#: not self-contained questions (rule 3)
NOT_QUESTIONS = ("composite", "arc_1d", "arc_agi", "rearc")
SEALED_PATH = Path("docs/data/sealed/sealed_split.json")


@dataclass(frozen=True)
class SealedProblem:
    """One problem of the sealed split."""

    id: str
    family: str
    question: str
    reference: str
    rg_entry: str

    def to_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "family": self.family,
            "question": self.question,
            "reference": self.reference,
            "rg_entry": self.rg_entry,
        }


def text_hash(text: str) -> str:
    """The content hash of a question: whitespace-normalized text, sha256."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


def remaining_families(catalogue: Sequence[str]) -> list[str]:
    """Rules 1 to 3: the catalogue, sorted, less every family used or not a question."""
    used = {f.name for f in FAMILIES} | set(USED_ELSEWHERE) | set(NOT_QUESTIONS)
    return [name for name in sorted(catalogue) if name not in used]


def pick_order(remaining: Sequence[str], count: int) -> list[str]:
    """Rule 4's order of preference: every ``step``-th family first, then the rest in list order
    (a family that fails is replaced by the first one not taken yet)."""
    step = max(1, len(remaining) // count)
    first = list(remaining[::step][:count])
    return first + [name for name in remaining if name not in first]


def _generate(name: str, per_family: int, seed: int) -> list[SealedProblem]:
    import reasoning_gym

    data = reasoning_gym.create_dataset(name, seed=seed, size=per_family)
    problems = []
    for entry in data:
        question = str(entry["question"])
        scored = {"answer": entry["answer"], "metadata": entry.get("metadata", {})}
        problems.append(
            SealedProblem(
                id=f"sealed:{name}:{text_hash(question)[:16]}",
                family=name,
                question=question,
                reference=str(entry["answer"]),
                rg_entry=json.dumps(scored, sort_keys=True, default=str),
            )
        )
    return problems


def choose(
    catalogue: Sequence[str], *, count: int = FAMILY_COUNT, per_family: int = PER_FAMILY, seed: int = SEALED_SEED
) -> dict[str, Any]:
    """The sealed split by rules 1 to 5, as the JSON object committed to :data:`SEALED_PATH`."""
    remaining = remaining_families(catalogue)
    order = pick_order(remaining, count)
    step = max(1, len(remaining) // count)
    chosen: list[str] = []
    skipped: list[dict[str, str]] = []
    problems: list[SealedProblem] = []
    for name in order:
        if len(chosen) == count:
            break
        try:
            drawn = _generate(name, per_family, seed)
        except Exception as exc:  # any generator failure is rule 4's skip
            skipped.append({"family": name, "why": f"generator failed: {type(exc).__name__}: {exc}"[:300]})
            continue
        median = statistics.median(len(p.question) for p in drawn) if drawn else 0
        if len(drawn) < per_family or median > MAX_QUESTION_CHARS:
            skipped.append({"family": name, "why": f"{len(drawn)} problems, median question {median:.0f} chars"})
            continue
        chosen.append(name)
        problems.extend(drawn)
    return {
        "rule": __doc__,
        "seed": seed,
        "per_family": per_family,
        "step": step,
        "catalogue": sorted(catalogue),
        "remaining": remaining,
        "families": chosen,
        "skipped": skipped,
        "question_sha256": sorted(text_hash(p.question) for p in problems),
        "problems": [p.to_json() for p in problems],
    }


def load_sealed(path: Path = SEALED_PATH) -> list[SealedProblem]:
    """The committed sealed problems, in their committed order."""
    data = json.loads(path.read_text())
    return [SealedProblem(**p) for p in data["problems"]]


def sealed_hashes(path: Path = SEALED_PATH) -> frozenset[str]:
    """Content hashes of every sealed question: what no export may contain."""
    return frozenset(json.loads(path.read_text())["question_sha256"])
