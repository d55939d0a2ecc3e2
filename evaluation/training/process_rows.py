"""Process-label records into the rows of ``process.jsonl`` and the run's manifest.

A row is written for a chosen chain of thought (:mod:`~evaluation.training.process_choice`, so
the export's rules hold again when the files are written: a problem withheld since its record
was drawn gives no row) whose newest record labels the same completion. A step whose every
rollout failed for infrastructure has no label and is left out (counted); a chain left with no
labelled step gives no row. The manifest counts the rows per family, task kind and outcome label,
and the mean value of the steps of right and of wrong chains, overall and by position: the value
of a wrong chain's steps should fall where it goes wrong, a right one's stay high.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evaluation.training.formats import PoolSource, ProcessCounts, ProcessManifest, ProcessRow, ProcessStep
from evaluation.training.process_choice import Chosen
from evaluation.training.process_labels import completion_sha256, newest

NOT_CHOSEN = "records: candidate not chosen now (withheld, or no longer in the pools)"
OTHER_COMPLETION = "records: of another completion than the pool's"
NOT_LABELLED = "candidates: not labelled yet (past --max-candidates or the time limit)"
STEPS_FAILED = "steps: every rollout failed for infrastructure"
CANDIDATE_FAILED = "candidates: every step failed for infrastructure"
RULES = (
    "candidates: chains of thought of the calibration split's pools; no development or sealed problem (content hash)",
    "per problem at most one verified-right and one verified-wrong chain (wrong value, then wrong form, then cut)",
    "a step's prefix: the completion up to and including the step; the answer's own step is never a prefix",
    "rollouts continue the prefix through the policy; graded by the problem's own checker, never a judge score",
    "right: a complete stated answer the checker accepts, not cut at max_tokens (the export's outcome label)",
    "value: right / graded rollouts; reaches: right > 0; an infrastructure error is never graded",
)


def _label(flag: bool) -> str:
    return "right" if flag else "wrong"


def _step(step: Mapping[str, Any]) -> ProcessStep:
    graded, right = int(step["rollouts"]), int(step["right"])
    return ProcessStep(
        index=step["index"], text=step["text"], prefix_chars=step["end"], rollouts=graded, right=right,
        cut=step["cut"], errors=step["errors"], value=right / graded, reaches=right > 0,
        generated_tokens=step["generated_tokens"],
    )  # fmt: skip


def process_rows(
    chosen: Sequence[Chosen], records: Iterable[Mapping[str, Any]], left_out: Counter[str]
) -> list[ProcessRow]:
    """The rows of the chosen candidates that have a record, in the order chosen; what is left
    out is counted in ``left_out`` (module docstring)."""
    done = newest(records)
    ids = {c.candidate_id for c in chosen}
    if stale := sum(1 for candidate_id in done if candidate_id not in ids):
        left_out[NOT_CHOSEN] += stale
    rows: list[ProcessRow] = []
    for c in chosen:
        record = done.get(c.candidate_id)
        if record is None:
            left_out[NOT_LABELLED] += 1
            continue
        trajectory = c.trajectory
        if record["completion_sha256"] != completion_sha256(trajectory.completion):
            left_out[OTHER_COMPLETION] += 1
            continue
        steps = [_step(s) for s in record["steps"] if s["rollouts"]]
        if dropped := len(record["steps"]) - len(steps):
            left_out[STEPS_FAILED] += dropped
        if not steps:
            left_out[CANDIDATE_FAILED] += 1
            continue
        row = ProcessRow(
            **trajectory.candidate.model_dump(), prompt=list(trajectory.prompt), completion=trajectory.completion,
            label=trajectory.outcome.label, failure=trajectory.outcome.failure, steps_total=record["steps_total"],
            steps=steps, steps_left_out=dropped, generated_tokens=record["generated_tokens"],
        )  # fmt: skip
        rows.append(row)
    return rows


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def counts(rows: Sequence[ProcessRow]) -> ProcessCounts:
    """The rows counted per family, task kind, outcome label and (wrong ones) failure kind."""
    return ProcessCounts(
        rows=len(rows), steps=sum(len(r.steps) for r in rows),
        by_family=dict(sorted(Counter(r.family for r in rows).items())),
        by_task_kind=dict(sorted(Counter(r.task_kind for r in rows).items())),
        by_label=dict(sorted(Counter(_label(r.label) for r in rows).items())),
        by_failure=dict(sorted(Counter(r.failure for r in rows if r.failure is not None).items())),
    )  # fmt: skip


def mean_values(rows: Sequence[ProcessRow]) -> tuple[dict[str, float | None], dict[str, list[float | None]]]:
    """Per outcome label: the mean value of its chains' steps, and the mean at each position
    (first labelled step, second, ...)."""
    overall: dict[str, float | None] = {}
    by_position: dict[str, list[float | None]] = {}
    for label in (True, False):
        group = [r for r in rows if r.label == label]
        overall[_label(label)] = _mean([s.value for r in group for s in r.steps])
        longest = max((len(r.steps) for r in group), default=0)
        by_position[_label(label)] = [_mean([r.steps[k].value for r in group if k < len(r.steps)])
                                      for k in range(longest)]  # fmt: skip
    return overall, by_position


def process_manifest(
    rows: Sequence[ProcessRow],
    left_out: Counter[str],
    *,
    headers: Sequence[Mapping[str, Any]],
    pool: PoolSource,
    revision: str,
    written_at: str,
) -> ProcessManifest:
    """What a run wrote, from the rows and its records' chunk ``headers`` (model, settings, tokens)."""
    first = headers[0] if headers else {}
    overall, by_position = mean_values(rows)
    return ProcessManifest(
        revision=revision, written_at=written_at,
        drawn_by=sorted({str(h.get("git_describe")) for h in headers}),
        model=str(first.get("model", "")), model_sha256=str(first.get("model_sha256", "")), pool=pool,
        settings=dict(first.get("settings", {})), chunks=len(headers), files={"process.jsonl": counts(rows)},
        left_out=dict(sorted(left_out.items())), mean_value=overall, mean_value_by_position=by_position,
        generated_tokens=sum(int(h.get("generated_tokens", 0)) for h in headers),
        prompt_tokens=sum(int(h.get("prompt_tokens", 0)) for h in headers), rules=list(RULES),
    )  # fmt: skip
