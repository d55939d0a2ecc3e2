"""The process-label run as chunks of records written whole, each under the shared model lock.

The records of ``python -m calibration process`` are kept as the live runs keep theirs
(:mod:`~.records`): ``process-NNNNN.jsonl`` chunks under the run's folder, each a header (the
code revision, the model and its sha256, the pool, the rollout settings, start and end time,
load average, lock wait, tokens spent) and one record per candidate
(:class:`~evaluation.training.process_labels.StepLabeller`). A chunk is labelled inside ``hold()``
(the model lock; other model work runs between chunks) and written whole, with what it finished
even when interrupted, so a resumed run labels only what no record holds
(:func:`~evaluation.training.process_labels.pending`). Records of another model or other rollout
settings in the folder are refused: labels of two models must not mix in one set.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from calibration.lib.records import LiveRunError, write_records
from evaluation.pools.provenance import load_average
from evaluation.training.process_choice import Chosen
from evaluation.training.process_labels import StepLabeller

SPLIT = "process"
#: header fields a resumed run must share with the records already written
SAME = ("model_sha256", "settings")


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def refuse_mixed(headers: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any]) -> None:
    """Raise :class:`~.records.LiveRunError` when a chunk was written with another model or
    other rollout settings than ``provenance``'s."""
    for header in headers:
        for key in SAME:
            if header.get(key) != provenance[key]:
                raise LiveRunError(f"records of {key} {header.get(key)} are in the folder; this run's is "
                                   f"{provenance[key]}: label into another folder")  # fmt: skip


async def _label_into(labeller: StepLabeller, chosen: Chosen, done: list[dict[str, Any]]) -> None:
    done.append(await labeller.label(chosen))


async def label_chunks(
    labeller: StepLabeller,
    todo: Sequence[Chosen],
    out: Path,
    provenance: Mapping[str, Any],
    *,
    seq: int,
    chunk_size: int,
    deadline: float | None = None,
    hold: Callable[[], AbstractContextManager[Any]] = nullcontext,
    log: Callable[[str], None] = print,
) -> int:
    """Label ``todo`` in chunks of ``chunk_size`` candidates (a chunk's at once), writing chunk
    ``seq`` on, until done or past ``deadline`` (``time.monotonic()``, checked before each
    chunk). Returns how many candidates were labelled."""
    labelled = 0
    for start in range(0, len(todo), chunk_size):
        if deadline is not None and time.monotonic() > deadline:
            log("time limit reached: the rest is labelled on a resumed run")
            break
        batch = todo[start : start + chunk_size]
        done: list[dict[str, Any]] = []
        with hold() as waited:
            began, started_at, load = time.monotonic(), utc_now(), load_average()
            try:
                await asyncio.gather(*(_label_into(labeller, c, done) for c in batch))
            finally:  # an interrupted chunk keeps the candidates it finished
                if done:
                    wall = time.monotonic() - began
                    header = {
                        **provenance, "started_at": started_at, "ended_at": utc_now(), "load_average_start": load,
                        "load_average_end": load_average(), "wall_s": round(wall, 1),
                        "lock_wait_s": round(float(waited or 0.0), 1),
                        "generated_tokens": sum(r["generated_tokens"] for r in done),
                        "prompt_tokens": sum(r["prompt_tokens"] for r in done),
                        "errors": sum(s["errors"] for r in done for s in r["steps"]),
                    }  # fmt: skip
                    path = write_records(out, SPLIT, seq, header, done)
                    seq, labelled = seq + 1, labelled + len(done)
                    log(f"{path.name}: {len(done)} candidates in {wall:.0f}s, {header['generated_tokens']} tokens, "
                        f"{header['errors']} rollout error(s); {labelled}/{len(todo)} this run")  # fmt: skip
    return labelled
