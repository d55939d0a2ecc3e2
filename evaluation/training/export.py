"""Trajectories into training data: fine-tuning rows, preference pairs, outcome labels and the
manifest that counts them.

- Duplicates are one example: two trajectories with the same prompt and the same completion,
  whitespace collapsed and lowercased (:func:`~evaluation.training.trajectories.normalized`),
  are kept once (the first read: pools in the order given, then served traces).
- Fine-tuning: per prompt, the best verified trajectory, "best" meaning labelled right (a
  complete answer an independent check found right, :mod:`~evaluation.training.outcomes`),
  then the fewest completion tokens (the cheapest way the model already knows to get it right),
  then the first read. A prompt with no right trajectory gives no row.
- Preferences: per prompt, every wrong trajectory against the best right one of the same
  modality (a wrong program against the best right program), or the prompt's best right one
  where its modality has none.
- Outcomes: every trajectory kept, right or wrong.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from evaluation.pools.store import Chunk
from evaluation.training.formats import (
    ChatMessage,
    Counts,
    Manifest,
    OutcomeRow,
    PoolSource,
    PreferenceRow,
    SftRow,
)
from evaluation.training.trajectories import Trajectory, normalized

DUPLICATE = "candidates: duplicate"
RULES = (
    "verified only by independent checks: the problem's checker, the sandbox's run, hidden tests; never a judge score",
    "label true: verified right, not cut at max_tokens, and (a program) computed rather than printed a literal",
    "left out and counted: unverifiable candidates, duplicates (same prompt, same normalized completion)",
    "never exported: a development (held-out) or sealed problem, checked by question content hash",
    "served traces: only of the opted-in API keys, each key's own traces (by the trace's recorded owner)",
    "fine-tuning row per prompt: the right trajectory with the fewest completion tokens",
)


@dataclass(frozen=True)
class Exported:
    """The rows of the three JSON Lines files, and what was left out on the way."""

    sft: list[SftRow]
    preferences: list[PreferenceRow]
    outcomes: list[OutcomeRow]
    left_out: Counter[str]
    prompts: int


def _prompt_key(prompt: Sequence[ChatMessage]) -> str:
    return json.dumps([[m.role, normalized(m.content)] for m in prompt])


def _turn(t: Trajectory) -> list[ChatMessage]:
    return [ChatMessage(role="assistant", content=t.assistant)]


def _best(group: Iterable[Trajectory]) -> Trajectory | None:
    right = [t for t in group if t.outcome.label]
    return min(right, key=lambda t: t.tokens) if right else None  # min keeps the first of equals


def _sft(t: Trajectory) -> SftRow:
    return SftRow(
        messages=[*t.prompt, *_turn(t)], **dict(t.candidate), completion_tokens=t.tokens,
    )  # fmt: skip


def _pairs(group: Sequence[Trajectory]) -> list[PreferenceRow]:
    best = _best(group)
    if best is None:
        return []
    rows = []
    for wrong in (t for t in group if not t.outcome.label):
        chosen = _best(t for t in group if t.candidate.modality == wrong.candidate.modality) or best
        assert wrong.outcome.failure is not None  # a false label always says why
        right, bad = chosen.candidate, wrong.candidate
        rows.append(
            PreferenceRow(
                prompt=list(wrong.prompt), chosen=_turn(chosen), rejected=_turn(wrong), prompt_id=bad.prompt_id,
                chosen_id=right.candidate_id, rejected_id=bad.candidate_id, chosen_modality=right.modality,
                rejected_modality=bad.modality, rejected_failure=wrong.outcome.failure, family=bad.family,
                task_kind=bad.task_kind,
            )
        )  # fmt: skip
    return rows


def _outcome(t: Trajectory) -> OutcomeRow:
    o = t.outcome
    return OutcomeRow(
        **dict(t.candidate), label=o.label, correct=o.correct, failure=o.failure,
        detail=o.detail, completion_tokens=t.tokens,
    )  # fmt: skip


def export(trajectories: Iterable[Trajectory], left_out: Counter[str] | None = None) -> Exported:
    """The rows of every format from ``trajectories``; ``left_out`` carries what the readers
    already left out (it is copied, then duplicates are added)."""
    counted: Counter[str] = Counter(left_out or {})
    groups: dict[str, list[Trajectory]] = {}
    seen: set[tuple[str, str]] = set()
    for t in trajectories:
        prompt = _prompt_key(t.prompt)
        key = (prompt, normalized(t.completion))
        if key in seen:
            counted[DUPLICATE] += 1
            continue
        seen.add(key)
        groups.setdefault(prompt, []).append(t)
    sft = [_sft(best) for group in groups.values() if (best := _best(group)) is not None]
    preferences = [row for group in groups.values() for row in _pairs(group)]
    outcomes = [_outcome(t) for group in groups.values() for t in group]
    return Exported(sft, preferences, outcomes, counted, len(groups))


def _counts(rows: Sequence[SftRow | PreferenceRow | OutcomeRow]) -> Counts:
    def tally(values: Iterable[str]) -> dict[str, int]:
        return dict(sorted(Counter(values).items()))

    failures: list[str] = []
    modalities: list[str] = []
    for row in rows:
        if isinstance(row, OutcomeRow):
            failures += [row.failure] if row.failure is not None else []
            modalities.append(row.modality)
        elif isinstance(row, PreferenceRow):
            failures.append(row.rejected_failure)
            modalities.append(row.rejected_modality)
        else:
            modalities.append(row.modality)
    return Counts(
        rows=len(rows), by_family=tally(r.family for r in rows), by_task_kind=tally(r.task_kind for r in rows),
        by_modality=tally(modalities), by_failure=tally(failures),
    )  # fmt: skip


def pool_source(path: str, chunks: Sequence[Chunk]) -> PoolSource:
    """A pool folder as its chunk headers record it: models, their sha256, the seeds, the code."""

    def distinct(values: Iterable[object]) -> list[str]:
        return sorted({str(v) for v in values if v not in (None, "")})

    headers = [c.header for c in chunks]
    return PoolSource(
        path=path, chunks=len(chunks), models=distinct(h.get("model") for h in headers),
        model_sha256=distinct(h.get("model_sha256") for h in headers),
        draw_seeds=sorted({int(h["settings"]["seed"]) for h in headers if "seed" in h.get("settings", {})}),
        data_seeds=sorted({int(h["data"]["seed"]) for h in headers if "seed" in h.get("data", {})}),
        drawn_by=distinct(h.get("git_describe") for h in headers),
    )  # fmt: skip


def manifest(exported: Exported, *, revision: str, exported_at: str, pools: Sequence[PoolSource],
             served_keys: Sequence[str]) -> Manifest:  # fmt: skip
    """What was exported and left out, from where, by which code."""
    return Manifest(
        revision=revision, exported_at=exported_at,
        files={
            "sft.jsonl": _counts(exported.sft),
            "preferences.jsonl": _counts(exported.preferences),
            "outcomes.jsonl": _counts(exported.outcomes),
        },
        left_out=dict(sorted(exported.left_out.items())), prompts=exported.prompts, pools=list(pools),
        served_keys=sorted(served_keys), rules=list(RULES),
    )  # fmt: skip
