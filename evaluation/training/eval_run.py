"""The evaluation's draw as a run that stops and resumes at any point: chunks of a few problems,
each written whole (:func:`~evaluation.pools.store.write_chunk`) with the model's sha256, the
draw settings and the code revision, each drawn inside ``hold()`` (the shared model lock).

On start the run reads the chunks already in its folder and draws only the problems none holds.
A chunk of another model (sha256) or other draw settings in the folder is an error: answers of
two models, or of two token caps, must not mix in one side of a comparison.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.pools.store import iter_chunks, latest_pools, write_chunk
from evaluation.training.eval_draw import EvalDrawer
from evaluation.training.eval_sets import EvalProblem


class MixedRun(RuntimeError):
    """The folder holds chunks of another model or other draw settings."""


@dataclass(frozen=True)
class EvalPlan:
    todo: list[EvalProblem]
    next_seq: int


def plan(folder: Path, split: str, problems: Sequence[EvalProblem], provenance: dict[str, Any]) -> EvalPlan:
    """What is left to draw and the next chunk number; raises :class:`MixedRun` (module docstring)."""
    chunks = list(iter_chunks(folder, split))
    for chunk in chunks:
        for key in ("model_sha256", "settings"):
            if chunk.header.get(key) != provenance[key]:
                raise MixedRun(f"{chunk.path}: {key} {chunk.header.get(key)} differs from this run's {provenance[key]}")
    done = latest_pools(chunks)
    todo = [p for p in problems if p.problem.id not in done]
    return EvalPlan(todo, max((c.seq for c in chunks), default=0) + 1)


async def draw_chunks(
    drawer: EvalDrawer,
    problems: Sequence[EvalProblem],
    folder: Path,
    split: str,
    provenance: dict[str, Any],
    *,
    chunk_size: int = 5,
    deadline: float | None = None,
    hold: Callable[[], AbstractContextManager[Any]] = nullcontext,
    log: Callable[[str], None] = print,
) -> int:
    """Draw what :func:`plan` leaves, ``chunk_size`` problems per chunk, until done or past
    ``deadline`` (``time.monotonic()``; checked before each chunk). Returns the problems drawn."""
    todo = plan(folder, split, problems, provenance)
    log(f"{folder}: {len(problems)} problems, {len(todo.todo)} to draw")
    seq, drawn = todo.next_seq, 0
    for start in range(0, len(todo.todo), chunk_size):
        if deadline is not None and time.monotonic() > deadline:
            log("time limit reached")
            break
        batch = todo.todo[start : start + chunk_size]
        with hold():
            began = time.monotonic()
            pools = await asyncio.gather(*(drawer.draw(item, split) for item in batch))
            wall = time.monotonic() - began
        completion = sum(c.completion_tokens for p in pools for d in p.draws.values() for c in d.calls)
        drawn_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        header = {**provenance, "drawn_at": drawn_at, "wall_s": round(wall, 1), "loadavg": list(os.getloadavg()),
                  "completion_tokens": completion}  # fmt: skip
        path = write_chunk(folder, split, seq, header, pools)
        seq, drawn = seq + 1, drawn + len(pools)
        log(f"{path.name}: {len(pools)} problems in {wall:.0f}s; {drawn}/{len(todo.todo)} this run")
    return drawn
