"""Re-check stored answers with the current checker, without drawing again.

A checker that learns a new spelling of a right answer (CHAMP's "…, or equivalently 252")
changes no candidate, only its verdict: every chain-of-thought and program candidate keeps
the answer it extracted, so its ``correct`` is recomputed from that answer and the chunk is
rewritten whole, its header noting when, by which code, and how many verdicts changed. Code
candidates were judged by their hidden tests in the sandbox and are left as they are.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from evaluation.datasets import Problem
from evaluation.pools import Chunk, Draw, ProblemPool, iter_chunks, write_chunk
from evaluation.problemset import answer_correct
from loadtests.pools.run import git_describe

_WRITTEN_BY_WRITER = ("type", "schema", "problems")


def rescore_pool(pool: ProblemPool) -> tuple[ProblemPool, int]:
    problem = Problem.from_dict(pool.problem)
    changed = 0
    draws: dict[str, Draw] = {}
    for name, draw in pool.draws.items():
        candidates = []
        for c in draw.candidates:
            if draw.kind != "code" and c.correct is not None:
                verdict = answer_correct(problem, c.answer or None)
                changed += verdict != c.correct
                c = dataclasses.replace(c, correct=verdict)
            candidates.append(c)
        draws[name] = dataclasses.replace(draw, candidates=tuple(candidates))
    return dataclasses.replace(pool, draws=draws), changed


def rescore_chunk(chunk: Chunk, describe: str) -> int:
    """Rewrite ``chunk`` with current verdicts when any changed; returns how many changed."""
    results = [rescore_pool(p) for p in chunk.pools]
    changed = sum(n for _, n in results)
    if changed:
        header = {k: v for k, v in chunk.header.items() if k not in _WRITTEN_BY_WRITER}
        note = {"git_describe": describe, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "changed": changed}
        header["rescored"] = [*header.get("rescored", []), note]
        write_chunk(chunk.path.parent, chunk.split, chunk.seq, header, [p for p, _ in results])
    return changed


def rescore(directory: Path) -> dict[str, int]:
    """Chunk file name -> verdicts changed, for every chunk under ``directory``."""
    describe = git_describe()
    return {chunk.path.name: rescore_chunk(chunk, describe) for chunk in iter_chunks(directory)}
