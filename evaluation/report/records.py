"""Per-request result records: the files a run leaves behind and a later run compares against.

A run is a directory holding ``run.json`` (what was run: model, grid, sampling settings,
problems, start time, git revision) and ``records.jsonl`` (one :class:`RequestRecord` per
line). Records are appended and flushed one at a time, so a run that is interrupted (Ctrl-C,
SIGTERM, a crash) keeps every request it finished; a truncated last line is skipped on read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TextIO

from evaluation.problems.datasets import Problem

Outcome = Literal["correct", "wrong", "error"]
RECORDS_FILE = "records.jsonl"
RUN_FILE = "run.json"
PROBLEMS_FILE = "problems.jsonl"
# 2: ``completion_tokens`` no longer holds verifier judge prompts (they are prompt tokens now);
# ``cached_tokens`` recorded. Schema-1 records are migrated when read (:meth:`RequestRecord.from_dict`).
SCHEMA_VERSION = 2


@dataclass
class RequestRecord:
    """Everything measured about one request. ``outcome == "error"`` means no verdict could be
    given (request failed, gateway error, sandbox failure): never counted as a wrong answer."""

    run_id: str
    problem_id: str
    dataset: str
    level: int
    split: str
    sample: int  # index of this sample of the problem in this grid cell
    effort_requested: str
    strategy_pinned: str  # "" when the gateway routed freely
    outcome: Outcome
    correct: bool | None = None
    answer: str | None = None  # normalized extracted answer of the returned text
    effort_applied: str = ""
    strategy: str = ""  # the strategy the gateway reports it ran
    n: int = 0  # candidates the gateway reports (0 if unknown)
    difficulty: float | None = None  # the gateway's estimate, when it made one
    difficulty_bin: str = ""
    termination: str = ""
    verifier_verdict: str = ""
    finish_reason: str = ""
    # The response's usage: every token an engine processed as input for the request (prefill),
    # the part of those served from a prefix cache, and every token generated (decode), of
    # which reasoning_tokens were not in the visible answer. Priced apart in reports.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0
    ttft_s: float | None = None  # first streamed delta (reasoning progress or answer)
    ttfa_s: float | None = None  # first answer-content delta
    latency_s: float = 0.0
    started_at: float = 0.0  # unix seconds
    trace_id: str = ""
    seed: int | None = None
    error: str = ""
    error_kind: str = ""  # "http_4xx", "http_5xx", "timeout", "connection", "check", ...
    # Candidates of the search, from the trace: (normalized answer, correct) pairs.
    candidates: list[tuple[str | None, bool]] = field(default_factory=list)
    budget_used: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def generated_tokens(self) -> int:
        """Decoded tokens (OpenAI's ``completion_tokens``)."""
        return self.completion_tokens

    @property
    def cell(self) -> tuple[str, str]:
        """The grid cell this request belongs to: (effort requested, strategy label)."""
        return self.effort_requested, self.strategy_pinned or "auto"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["candidates"] = [(a, bool(c)) for a, c in kwargs.get("candidates", [])]
        if int(kwargs.get("schema", 1)) < 2:
            _migrate_v1(kwargs)
        return cls(**kwargs)


def _migrate_v1(kwargs: dict[str, Any]) -> None:
    """Schema 1 billed generative verifiers' judge prompts as completion tokens: the gateway
    added ``budget_used.verifier_tokens`` (judge prompt + judge completion; the judges scored
    without generating, so all of it prompt) to ``completion_tokens`` and to the reasoning
    tokens. Move it to ``prompt_tokens`` so old runs price prefill and decode like new ones."""
    used = dict(kwargs.get("budget_used") or {})
    completion = int(kwargs.get("completion_tokens", 0))
    moved = min(completion, max(0, int(used.get("verifier_tokens") or 0)))
    if moved:
        kwargs["completion_tokens"] = completion - moved
        kwargs["prompt_tokens"] = int(kwargs.get("prompt_tokens", 0)) + moved
        kwargs["reasoning_tokens"] = max(0, int(kwargs.get("reasoning_tokens", 0)) - moved)
        used.setdefault("verifier_prompt_tokens", moved)
        kwargs["budget_used"] = used
    kwargs["schema"] = SCHEMA_VERSION


class RecordWriter:
    """Appends records to ``records.jsonl`` with a flush and fsync per record."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.path = run_dir / RECORDS_FILE
        self._file: TextIO = self.path.open("a", encoding="utf-8")
        self.count = 0

    def write(self, record: RequestRecord) -> None:
        self._file.write(record.to_json() + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.count += 1

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_run_meta(run_dir: Path, meta: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / (RUN_FILE + ".tmp")
    tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, **meta}, indent=2, sort_keys=True), encoding="utf-8")
    tmp.replace(run_dir / RUN_FILE)


def write_problems(run_dir: Path, problems: Iterable[Problem]) -> None:
    """The run's problems (questions and references), so calibration can embed the prompts."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / PROBLEMS_FILE
    known = set(read_problems(run_dir)) if path.exists() else set()
    with path.open("a", encoding="utf-8") as handle:
        for p in problems:
            if p.id not in known:
                handle.write(json.dumps(p.to_dict(), sort_keys=True) + "\n")
                known.add(p.id)


def read_problems(run_dir: Path) -> dict[str, Problem]:
    path = run_dir / PROBLEMS_FILE
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            p = Problem.from_dict(json.loads(line))
            out[p.id] = p
    return out


def read_run_meta(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_FILE
    return dict(json.loads(path.read_text(encoding="utf-8"))) if path.exists() else {}


def iter_records(path: Path) -> Iterator[RequestRecord]:
    """Records of a run directory or a ``records.jsonl`` file; a torn last line is skipped."""
    file = path / RECORDS_FILE if path.is_dir() else path
    if not file.exists():
        raise FileNotFoundError(f"no records at {file}")
    with file.open(encoding="utf-8") as handle:
        for line in handle:
            line = line.strip()
            if not line:
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                continue  # the line being written when the run was killed
            yield RequestRecord.from_dict(data)


def read_records(paths: Iterable[Path]) -> list[RequestRecord]:
    return [r for p in paths for r in iter_records(p)]


def done_keys(path: Path) -> set[tuple[str, str, str, int]]:
    """(problem, effort, pinned strategy, sample) already measured — lets ``--resume`` skip them."""
    if not (path / RECORDS_FILE).exists():
        return set()
    return {(r.problem_id, r.effort_requested, r.strategy_pinned, r.sample) for r in iter_records(path)}
