"""Candidate pools: every sample drawn for a problem once, stored so configurations can be
priced offline (sample once, price many: search-and-learn, Snell et al. 2024).

A pool holds, per problem, one :class:`Draw` per kind of sample (``cot``: chains of thought;
``program``: programs run in the sandbox; ``code``: function completions scored by hidden
tests), each a greedy candidate followed by ``k`` sampled ones in draw order, and the policy
calls that produced them (wall seconds, prompt and cached tokens), so a configuration's tokens
and latency can be estimated from the calls it would have made. A code draw also holds the
inputs the model wrote for it and each candidate's behaviour on them (:class:`CodeTests`), so
code chosen by running it is priced as served.

Pools are written in chunks, one JSON Lines file per few problems: a header line with the
chunk's provenance (the producing code's ``git describe --dirty``, the model's sha256, the
program-prompt version, the data seeds, the draw settings, the counts), then one line per
problem. A chunk file is written whole (temporary file, then rename), so an interrupted run
leaves only complete chunks and resumes after them. When a problem appears in several chunks
the newest chunk (highest sequence number) is the one read.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from services.common.difficulty_features import estimation_text
from services.common.task_type import TaskType, classify_task

DrawKind = Literal["cot", "program", "code"]
DRAW_KINDS: tuple[DrawKind, ...] = ("cot", "program", "code")
POOL_SCHEMA = 1
_CHUNK_RE = re.compile(r"^(?P<split>[a-z]+)-(?P<seq>\d{5})\.jsonl$")
_OPTIONAL_WHEN_EMPTY = ("judge_tokens", "judge_s", "behaviour", "asserted", "behaviour_s")


@dataclass(frozen=True)
class Call:
    """One policy call: how many candidates it drew, what it cost and how long it took.
    ``overlapped``: other calls shared the engine meanwhile, so ``wall_s`` is not this call's
    own time (calibration/lib/drawer.py); ``longest``: the longest candidate's tokens, set where
    the call's candidates are not stored (a latency probe's)."""

    n: int
    temperature: float
    max_tokens: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    wall_s: float
    overlapped: bool = False
    longest: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The stored form; the two later fields are left out at their defaults, so a chunk
        drawn before they existed rewrites unchanged."""
        data = asdict(self)
        for name in ("overlapped", "longest"):
            if not data[name]:
                del data[name]
        return data


@dataclass(frozen=True)
class PoolCandidate:
    """One candidate. ``key`` is its vote key ("" abstains), ``correct`` its verdict (``None``:
    the check failed for an infrastructure reason). ``cut`` is True when generation stopped at
    ``max_tokens``. Programs also carry their source as run, what they printed and the sandbox
    seconds; code candidates their source (``program``) so behaviour can be computed later."""

    index: int
    greedy: bool
    seed: int
    call: int  # index into Draw.calls
    text: str
    completion_tokens: int
    cut: bool
    key: str
    correct: bool | None
    answer: str = ""
    mean_logprob: float | None = None
    program: str = ""
    status: str = ""  # sandbox status of a program ("" when none ran)
    stdout: str = ""
    sandbox_s: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)  # judge name -> score, when judged
    error: str = ""
    # judge name -> what judging this candidate cost: the judge's tokens (prompt side, as
    # records schema 2 counts a judge's prompts, plus its completion tokens if any) and seconds,
    # the candidate's share of the verifier call that scored it (calibration/lib/judging.py)
    judge_tokens: dict[str, int] = field(default_factory=dict)
    judge_s: dict[str, float] = field(default_factory=dict)
    # a code candidate run as ``code_execution`` runs it, on its draw's ``tests`` inputs: per
    # input the canonical result or exception (services/search/strategies/code_harness.py) and
    # whether the model's assertion held, and the sandbox seconds of that run; empty when it
    # has no function to run (it abstains) or its draw has no tests yet
    behaviour: list[str] = field(default_factory=list)
    asserted: list[bool | None] = field(default_factory=list)
    behaviour_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """The stored form. Judge costs and behaviour are left out while empty, so a candidate
        without them is stored exactly as before they existed (old chunks rewrite unchanged)."""
        data = asdict(self)
        for name in _OPTIONAL_WHEN_EMPTY:
            if not data[name]:
                del data[name]
        return data


@dataclass(frozen=True)
class CodeTests:
    """The inputs ``code_execution`` runs a code draw's candidates on, written as it writes them
    when served: the model's test text from one greedy policy call (``call``), the entry point
    it was asked for, the literal inputs parsed from it (arguments and expected result as
    source; ``None``: nothing asserted), and the fingerprint of the code that wrote, parsed
    and ran them (``version``: calibration/lib/code_runs.py). Each candidate's results on these
    inputs are its ``behaviour``, so code chosen by execution is priced offline."""

    text: str
    entry: str
    cases: tuple[tuple[str, str | None], ...]
    call: Call
    version: str

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "entry": self.entry, "cases": [list(c) for c in self.cases],
                "call": self.call.to_dict(), "version": self.version}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CodeTests:
        cases = tuple((str(args), None if expected is None else str(expected)) for args, expected in data["cases"])
        return cls(data["text"], data["entry"], cases, Call(**data["call"]), data["version"])


@dataclass(frozen=True)
class Draw:
    """A greedy candidate then ``k`` sampled ones of one kind, in draw order; a code draw also
    the inputs its candidates were run on (``tests``, once run)."""

    kind: DrawKind
    candidates: tuple[PoolCandidate, ...]
    calls: tuple[Call, ...]
    prompt: str = ""  # fingerprint of the messages drawn from (prompt_fingerprint); "" before it was kept
    tests: CodeTests | None = None

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "kind": self.kind,
                "candidates": [c.to_dict() for c in self.candidates],
                "calls": [c.to_dict() for c in self.calls],
            }
            | ({"prompt": self.prompt} if self.prompt else {})
            | ({"tests": self.tests.to_dict()} if self.tests is not None else {})
        )

    @property
    def greedy(self) -> PoolCandidate | None:
        return next((c for c in self.candidates if c.greedy), None)

    @property
    def sampled(self) -> tuple[PoolCandidate, ...]:
        return tuple(c for c in self.candidates if not c.greedy)


@dataclass(frozen=True)
class ProblemPool:
    """Every draw of one problem, with the problem itself (so pricing needs nothing else), and
    the latency probe of the sitting that drew it when its calls overlapped (the calls made
    alone that the latency model is fitted on, :func:`~evaluation.pricing.table.fit_latency`)."""

    problem: dict[str, Any]  # Problem.to_dict()
    family: str
    kind: str  # task kind: arithmetic, word, code, math, counting, ...
    split: str
    task_type: str  # what services.common.task_type.classify_task says today
    draws: dict[str, Draw]
    latency_probe: tuple[Call, ...] = ()

    @property
    def id(self) -> str:
        return str(self.problem["id"])

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "problem",
            "problem": self.problem,
            "family": self.family,
            "kind": self.kind,
            "split": self.split,
            "task_type": self.task_type,
            "draws": {name: draw.to_dict() for name, draw in self.draws.items()},
        } | ({"latency_probe": [c.to_dict() for c in self.latency_probe]} if self.latency_probe else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemPool:
        draws = {}
        for name, raw in data["draws"].items():
            draws[name] = Draw(
                kind=raw["kind"],
                candidates=tuple(PoolCandidate(**c) for c in raw["candidates"]),
                calls=tuple(Call(**c) for c in raw["calls"]),
                prompt=raw.get("prompt", ""),
                tests=CodeTests.from_dict(raw["tests"]) if "tests" in raw else None,
            )
        probe = tuple(Call(**c) for c in data.get("latency_probe", ()))
        return cls(data["problem"], data["family"], data["kind"], data["split"], data["task_type"], draws, probe)


@dataclass(frozen=True)
class Chunk:
    """One chunk file: its provenance header and its problems."""

    path: Path
    split: str
    seq: int
    header: dict[str, Any]
    pools: tuple[ProblemPool, ...]


def prompt_fingerprint(messages: Iterable[tuple[str, str]]) -> str:
    """A short hash of (role, content) messages: a draw whose prompt the strategy would now
    write differently (a form instruction it learnt to strip) is stale for that problem alone."""
    text = json.dumps([[role, content] for role, content in messages], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def chunk_name(split: str, seq: int) -> str:
    return f"{split}-{seq:05d}.jsonl"


def write_jsonl_chunk(
    directory: Path, split: str, seq: int, header: dict[str, Any], rows: Iterable[dict[str, Any]]
) -> Path:
    """Chunk ``seq`` of ``split`` under ``directory``: ``header``, then one JSON line per row,
    written to a temporary file and renamed, so a crash leaves either the complete file or none
    (the pools' chunks and a live run's records are both kept so)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / chunk_name(split, seq)
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as out:
        for line in (header, *rows):
            out.write(json.dumps(line, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    tmp.replace(path)
    return path


def write_chunk(directory: Path, split: str, seq: int, header: dict[str, Any], pools: Iterable[ProblemPool]) -> Path:
    """Write a whole pool chunk atomically (:func:`write_jsonl_chunk`)."""
    rows = [p.to_dict() for p in pools]
    return write_jsonl_chunk(
        directory, split, seq, {"type": "header", "schema": POOL_SCHEMA, **header, "problems": len(rows)}, rows
    )


def read_chunk(path: Path) -> Chunk:
    match = _CHUNK_RE.match(path.name)
    if match is None:
        raise ValueError(f"{path}: not a chunk file name (<split>-NNNNN.jsonl)")
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("type") != "header":
        raise ValueError(f"{path}: first line is not a chunk header")
    header, rows = lines[0], lines[1:]
    if header.get("problems") != len(rows):
        raise ValueError(f"{path}: header counts {header.get('problems')} problems, file has {len(rows)}")
    pools = tuple(ProblemPool.from_dict(r) for r in rows)
    return Chunk(path, match["split"], int(match["seq"]), header, pools)


def iter_chunks(directory: Path, split: str | None = None) -> Iterator[Chunk]:
    """Chunks in sequence order (of one split, or all)."""
    if not directory.is_dir():
        return
    paths = sorted(p for p in directory.iterdir() if _CHUNK_RE.match(p.name))
    found = [read_chunk(p) for p in paths]
    for chunk in sorted(found, key=lambda c: (c.split, c.seq)):
        if split is None or chunk.split == split:
            yield chunk


def latest_pools(chunks: Iterable[Chunk]) -> dict[str, tuple[ProblemPool, Chunk]]:
    """Problem id -> its pool from the newest chunk that holds it."""
    latest: dict[str, tuple[ProblemPool, Chunk]] = {}
    for chunk in sorted(chunks, key=lambda c: (c.split, c.seq)):
        for pool in chunk.pools:
            latest[pool.id] = (pool, chunk)
    return latest


def read_pools(directory: Path, split: str | None = None) -> list[ProblemPool]:
    """Every problem's newest pool under ``directory``, in the order first drawn."""
    return [pool for pool, _ in latest_pools(iter_chunks(directory, split)).values()]


def prompt_text(pool: ProblemPool) -> str:
    """The text a served request with this problem's question is read by (``estimation_text``:
    its task type, difficulty and confidence prior)."""
    return estimation_text([("user", str(pool.problem["question"]))], "")


def task_type_of(pool: ProblemPool) -> TaskType:
    """The gateway's task type of the problem's prompt by today's rules (what a request with it
    is routed by, and what its served confidence reads); ``ProblemPool.task_type`` is what the
    rules said when it was drawn."""
    return classify_task(prompt_text(pool))
